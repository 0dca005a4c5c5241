"""Column declarations of the public domain: how each column's values map to integer codes.

Code layout of a column (in this order): the declared values or bins ``0 .. k-1``; then the
``other`` code if unseen categories map to it; then the ``null`` code if nulls are kept as a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from privsyn_spark.errors import UsageError


class SchemaError(UsageError):
    """A schema document or a table does not fit the rules; the message names the column."""


NULL_POLICIES = ("value", "fail", "none")
"""``value``: nulls get their own code (default). ``fail``: the run stops when the noisy tally of nulls
is clearly above 0 (``privsyn_spark.privacy.policy_checks``; charged like any release).
``none``: the column is declared non-null (public knowledge): it has no null code, and a null in the
input is an out-of-domain value (counted; the ``other`` code or the first bin, or the job stops when
the column's ``unseen``/``out_of_range`` policy is ``fail``)."""

CATEGORY_POLICIES = ("other", "fail")
"""Unseen categories: ``other`` maps them to an extra code; ``fail`` stops the run when their noisy tally
is clearly above 0 (``privsyn_spark.privacy.policy_checks``; below that they count as the first value)."""

NUMBER_POLICIES = ("clip", "fail")
"""Numbers outside [min, max]: ``clip`` to the edge bin; ``fail`` stops the run when their noisy tally is
clearly above 0 (``privsyn_spark.privacy.policy_checks``; below that they are clipped)."""

CATEGORY_DTYPES = ("string", "int", "long", "double", "boolean")
NUMBER_DTYPES = ("int", "long", "double", "float", "date", "timestamp")


@dataclass(frozen=True)
class Column:
    """Common part of every kept column."""

    name: str
    dtype: str
    nulls: str = "value"

    kind: ClassVar[str] = ""

    @property
    def base_size(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def other_code(self) -> int | None:
        """Code of the ``other`` value, or None if the column has none."""
        return None

    @property
    def null_code(self) -> int | None:
        """Code of the null value, or None if nulls fail the job."""
        if self.nulls != "value":
            return None
        return self.base_size + (1 if self.other_code is not None else 0)

    @property
    def size(self) -> int:
        """Number of codes of this column."""
        return self.base_size + (self.other_code is not None) + (self.null_code is not None)


@dataclass(frozen=True)
class CategoricalColumn(Column):
    """A column with a declared list of values."""

    values: tuple[Any, ...] = ()
    unseen: str = "other"
    hierarchy: tuple[int, ...] = ()
    """Public prefix lengths, longest first (``hierarchy: {prefix: [3, 1]}``): a value too rare to keep is merged
    with its parent's rare values (:func:`privsyn_spark.privacy.rare_values.merge_attribute`)."""

    kind: ClassVar[str] = "categorical"

    @property
    def base_size(self) -> int:
        return len(self.values)

    @property
    def other_code(self) -> int | None:
        return len(self.values) if self.unseen == "other" else None

    def labels(self) -> list[Any]:
        """The value each code decodes to (``other`` and null decode to None)."""
        return list(self.values) + [None] * (self.size - len(self.values))

    def prefix_levels(self) -> list[np.ndarray]:
        """Per prefix length of :attr:`hierarchy`: each code's group (values sharing that prefix), -1 for the
        ``other`` and null codes."""
        levels = []
        for length in self.hierarchy:
            prefixes = [str(v)[:length] for v in self.values]
            index = {p: i for i, p in enumerate(dict.fromkeys(prefixes))}
            levels.append(np.asarray([index[p] for p in prefixes] + [-1] * (self.size - len(self.values))))
        return levels

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "type": self.kind, "dtype": self.dtype,
                               "values": list(self.values), "unseen": self.unseen, "nulls": self.nulls}
        if self.hierarchy:  # only then: a flat column keeps its schema's hash
            doc["hierarchy"] = {"prefix": list(self.hierarchy)}
        return doc


@dataclass(frozen=True)
class NumericalColumn(Column):
    """A column with public bounds cut into bins; ``edges`` has one more entry than bins.

    Bin i holds ``edges[i] <= x < edges[i+1]``; the last bin also holds ``x == edges[-1]``.
    Dates and timestamps are binned over seconds since the epoch (UTC). Each of ``spikes`` (a
    single value holding a large share, e.g. 0 in an amount column) has a bin of its own holding
    that one value only (see :func:`with_spike_bins`); it decodes to exactly that value.
    """

    edges: tuple[float, ...] = field(default=())
    out_of_range: str = "clip"
    spikes: tuple[float, ...] = ()

    kind: ClassVar[str] = "numerical"

    @property
    def base_size(self) -> int:
        return len(self.edges) - 1

    @property
    def integer(self) -> bool:
        """Whether decoded values must be whole numbers (ints, longs, dates, timestamps)."""
        return self.dtype in ("int", "long", "date", "timestamp")

    def edge_array(self) -> np.ndarray:
        return np.asarray(self.edges, dtype=np.float64)

    def spike_codes(self) -> dict[int, float]:
        """Bin code -> the spike value that bin holds alone."""
        edges = self.edge_array()
        codes = np.minimum(np.searchsorted(edges, self.spikes, side="right") - 1, len(edges) - 2)  # top edge: last bin
        return {int(c): float(v) for c, v in zip(codes, self.spikes)}

    def to_dict(self) -> dict[str, Any]:
        doc = {"name": self.name, "type": self.kind, "dtype": self.dtype, "edges": list(self.edges),
               "out_of_range": self.out_of_range, "nulls": self.nulls}
        if self.spikes:
            doc["spikes"] = list(self.spikes)
        return doc


def uniform_edges(lower: float, upper: float, bins: int, integer: bool) -> tuple[float, ...]:
    """``bins`` equal-width bins over [lower, upper].

    Integer columns get edges on half-integers (``lower - 0.5 .. upper + 0.5``) so no value sits on
    an edge and every bin holds at least one whole number; at most one bin per value.
    """
    if integer:
        lower, upper = float(np.ceil(lower)), float(np.floor(upper))
        bins = int(min(bins, upper - lower + 1))
        return tuple(float(e) for e in np.linspace(lower - 0.5, upper + 0.5, bins + 1))
    return tuple(float(e) for e in np.linspace(lower, upper, bins + 1))


def integer_bin_bounds(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest whole number inside each bin (the last bin is closed at its top edge)."""
    lo = np.ceil(edges[:-1])
    hi = np.ceil(edges[1:]) - 1
    hi[-1] = np.floor(edges[-1])
    return lo.astype(np.int64), hi.astype(np.int64)


def with_spike_bins(edges: tuple[float, ...], spikes: tuple[float, ...], integer: bool) -> tuple[float, ...]:
    """``edges`` split so that each spike value is alone in its bin (idempotent).

    Integer columns: the bin holding whole number v is cut at v and v + 1 where it holds other whole
    numbers (at v - 0.5 / v + 0.5 next to the closed top edge). Other columns: cut at v and at the next
    float above v, so the bin ``[v, nextafter(v))`` holds v only. Raises ValueError for a spike
    outside the bounds.
    """
    cuts = set(float(e) for e in edges)
    for v in spikes:
        v = float(v)
        if not edges[0] <= v <= edges[-1] or (integer and v != round(v)):
            raise ValueError(f"spike {v:g} is not a {'whole number ' if integer else 'value '}inside "
                             f"[{edges[0]:g}, {edges[-1]:g}]")
        current = np.asarray(sorted(cuts))
        if integer:
            lo, hi = integer_bin_bounds(current)
            b = int(np.searchsorted(hi, v))  # first bin whose top whole number is >= v
            if lo[b] < v:
                cuts.add(v if v < current[-1] else v - 0.5)
            if hi[b] > v:
                cuts.add(v + 1 if v + 1 < current[-1] else v + 0.5)
        else:
            above = float(np.nextafter(v, np.inf))
            if not above < current[-1]:
                raise ValueError(f"spike {v:g} is at the top edge {current[-1]:g}: raise the upper bound")
            cuts.update((v, above))
    return tuple(sorted(cuts))
