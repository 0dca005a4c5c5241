"""A private draft's numeric columns: bounds, bins and spikes from their noisy histograms, and the noisy share
of rows outside each drafted range (``infer-schema --epsilon``; the mechanisms in ``privacy.discovery``,
the range and bins in ``privacy.draft_range``).

One Spark pass counts every numeric column on its public grid (``measure.draft_counts.grid_counts``: geometric
for numbers, ``privacy.calendar_grid`` for dates and timestamps); the
exact counts go straight into the privacy code. A column whose noisy share outside its range is above
``OUTSIDE_WARNING_SHARE`` (and the noise) gets a warning: the noisy figure is a release, never an exact count.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure import draft_counts as counts
from privsyn_spark.privacy import discovery as dp
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.calendar_grid import calendar_grid
from privsyn_spark.privacy.draft_range import drafted_edges
from privsyn_spark.privacy.noise import NoiseSampler
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.instants import range_end_seconds
from privsyn_spark.schema.time_parts import DAY, iso_day

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Bounds assumed for a numeric column without declared ones, by dtype (stated in the draft's header).
ASSUMED_BOUNDS = {"int": (-2.0 ** 31, 2.0 ** 31 - 1), "long": (-2.0 ** 53, 2.0 ** 53), "double": (-1e15, 1e15),
                  "date": (-2208988800.0, 4102444800.0), "timestamp": (-2208988800.0, 4102444800.0)}

TEMPORAL = ("date", "timestamp")
"""The dtypes drafted on the calendar grid (``privacy.calendar_grid``) and stated as ISO dates/timestamps."""

PARTS_MAX_DAYS = 3660
"""A drafted timestamp spanning at most this many days (ten years) is proposed as day and hour parts."""

OUTSIDE_WARNING_SHARE = 0.01
"""A drafted column whose noisy share of rows outside its range is above this (and above ``EMPTY_SIGMAS``
noise sd, so that noise alone rarely warns) gets a warning (log line)."""


def draft_numeric_columns(df: DataFrame, numeric: Mapping[str, str], bounds: Mapping[str, tuple[float, float]],
                          tokens: list[str], rho_column: float, notes: list[str], *, bins: int, spike_share: float,
                          accountant: Accountant, sampler: NoiseSampler,
                          unit: PrivacyUnit) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The schema spec of each numeric column (``numeric``: name -> dtype) and its drafted ``range`` with the
    ``noisy_share`` of rows outside it (``noise_sd``), each column within ``rho_column``."""
    specs: dict[str, dict[str, Any]] = {}
    outside: dict[str, dict[str, Any]] = {}
    grids = {}
    for name, dtype in numeric.items():
        declared = bounds.get(name)
        lo, hi = declared if declared else ASSUMED_BOUNDS[dtype]
        if not declared:
            notes.append(f"column {name!r}: no declared bounds; its range was drafted inside "
                         f"[{shown(lo, dtype)}, {shown(hi, dtype)}] ({dtype})")
        if dtype in TEMPORAL:
            grids[name] = calendar_grid(float(lo), float(hi))
        else:
            grids[name] = dp.geometric_grid(float(lo), float(hi), dtype in ("int", "long"))
    exact_cells = counts.grid_counts(df, {n: (g.starts, g.lower, g.upper, numeric[n] in TEMPORAL)
                                          for n, g in grids.items()}, tokens)
    for name, grid in grids.items():
        dtype = numeric[name]
        temporal = dtype in TEMPORAL
        cells, nulls, beyond = exact_cells.pop(name)
        release = dp.release_numeric(
            cells, nulls, grid, rho_column,
            partial(counts.whole_number_counts, df, name, tokens, temporal),
            accountant=accountant, sampler=sampler, name=f"infer:{name}", spike_share=spike_share, unit=unit)
        declared = bounds.get(name)
        edges = drafted_edges(release, bins, *(declared or (None, None)))
        if not edges:
            notes.append(f"column {name!r} dropped: no value above the noise")
            specs[name] = {"name": name, "type": "drop"}
            continue
        held = dp.release_outside(cells, beyond, edges, release, dp.NUMERIC_SPLIT[4] * rho_column,
                                  accountant=accountant, sampler=sampler, name=f"infer:{name}", unit=unit)
        del cells  # exact tallies stay here
        outside[name] = {"range": [shown(_edge(edges[0], grid.integer), dtype),
                                   shown(_edge(edges[-1], grid.integer), dtype)],
                         "noisy_share": held.share, "noise_sd": held.sd}
        if held.share > max(OUTSIDE_WARNING_SHARE, dp.EMPTY_SIGMAS * held.sd):  # above 1%, and not by noise alone
            log.warning("column %r: a noisy %.1f%% of the rows (noise sd %.1f%%) fall outside the drafted range "
                        "[%s, %s]; a run clips them: review its bounds", name, 100 * held.share, 100 * held.sd,
                        *outside[name]["range"])
        spikes = sorted(v for v in release.spikes if edges[0] <= v <= edges[-1])
        spec = {"name": name, "type": "numerical", "dtype": dtype, "edges": [_edge(e, grid.integer) for e in edges],
                "out_of_range": "clip",
                "nulls": "value" if release.null_noisy >= dp.EMPTY_SIGMAS * release.sigmas[0] else "none"}
        if spikes:
            spec["spikes"] = [_edge(v, grid.integer) for v in spikes]
        specs[name] = _as_parts(spec, edges, notes)
    return specs, outside


def declared_bounds(name: str, given: tuple[Any, Any], dtype: str) -> tuple[float, float]:
    """A column's declared bounds as numbers: numbers for any column; for a date or timestamp also ISO dates and
    timestamps (``schema.instants.range_end_seconds``: UTC without an offset, a date as the upper end holds its
    day). Anything else, or a low end not below the high one, is a one-line SchemaError."""
    try:
        if dtype in TEMPORAL:
            lo, hi = range_end_seconds(given[0], False), range_end_seconds(given[1], True)
        else:
            lo, hi = float(given[0]), float(given[1])
    except (TypeError, ValueError, OverflowError):
        what = "numbers or ISO dates/timestamps" if dtype in TEMPORAL else "numbers"
        raise SchemaError(f"--bounds for column {name!r} ({dtype}): expected {what}, got {given!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise SchemaError(f"--bounds for column {name!r}: expected finite LO below HI, got {given!r}")
    return lo, hi


def _as_parts(spec: dict[str, Any], edges: Sequence[float], notes: list[str]) -> dict[str, Any]:
    """A drafted timestamp without spikes whose range spans at most ``PARTS_MAX_DAYS`` days, as ``type: timestamp``
    with ``parts: [day, hour]`` over the range's days (:mod:`privsyn_spark.schema.time_parts`); else ``spec``."""
    first, last = (math.floor(e / DAY) for e in (edges[0], edges[-1]))
    if spec["dtype"] != "timestamp" or "spikes" in spec:
        return spec
    if last - first + 1 > PARTS_MAX_DAYS:
        notes.append(f"column {spec['name']!r}: its range spans more than {PARTS_MAX_DAYS} days, so it is drafted "
                     f"as bins; declare its days (--bounds) to get day and hour parts")
        return spec
    return {"name": spec["name"], "type": "timestamp", "dtype": "timestamp", "start": iso_day(first),
            "end": iso_day(last), "parts": ["day", "hour"], "out_of_range": "clip", "nulls": spec["nulls"]}


def shown(value: float, dtype: str) -> float | str:
    """A range end as the header and ``draft.outside_range`` state it: an ISO date (``date``) or UTC timestamp
    (``timestamp``, with ``Z``) for temporal columns, else the number."""
    if dtype not in TEMPORAL:
        return value
    instant = dt.datetime.fromtimestamp(value, dt.timezone.utc)
    return instant.date().isoformat() if dtype == "date" else instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def stated(value: float | str) -> str:
    """A range end in the draft's header: a number as ``:g``, a date or timestamp (ISO text) as it is."""
    return value if isinstance(value, str) else f"{value:g}"


def _edge(value: float, integer: bool) -> float | int:
    """An edge as written in the file: whole numbers as ints, half-integers as they are."""
    return int(value) if integer and float(value).is_integer() and math.isfinite(value) else float(value)
