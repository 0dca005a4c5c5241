"""The marginal engine: exact count tables over the encoded table, one pass per request.

The encoded columns are bit-packed into a few bigint columns in Spark SQL
(:mod:`~privsyn_spark.measure.packing`); every Spark partition builds partial count arrays over its
rows and the partials are summed with a tree aggregation. Only count arrays reach the driver.
Two backends do the per-partition counting: ``jvm`` (:mod:`~privsyn_spark.measure.jvm_counter`,
inside the executors' JVMs) and ``arrow`` (:mod:`~privsyn_spark.measure.arrow_counter`, ``mapInArrow``
+ ``np.bincount`` in Python workers); ``auto`` takes ``jvm`` when the session has loaded its jar.
Per-partition memory is the requested cells (8 bytes each); a request above ``max_cells`` is refused.

A requested marginal contained in another requested one is summed from it on the driver (exact),
so asking for all 1-way and 2-way tables costs only the 2-way counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from math import comb
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.arrow_counter import count_with_arrow
from privsyn_spark.measure.encode import EncodedTable
from privsyn_spark.measure.jvm_counter import count_with_jvm, jvm_counter_loaded
from privsyn_spark.measure.packing import PackedCodes, pack_codes
from privsyn_spark.runtime.backend import backend_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MAX_CELLS = 20_000_000
BACKENDS = ("auto", "jvm", "arrow")


class CellCapExceeded(UsageError):
    """The requested count tables hold more cells than the configured cap."""


@dataclass
class CountingPass:
    """Exact count tables (canonical attribute order), the row count and the out-of-domain tallies."""

    tables: dict[tuple[str, ...], np.ndarray]
    rows: int
    out_of_domain: dict[str, int] = field(default_factory=dict)
    null_failures: dict[str, int] = field(default_factory=dict)
    not_a_number: dict[str, int] = field(default_factory=dict)
    """Per numerical column: values that are NaN or do not parse as a number (encoded to the first bin)."""
    seconds: float = 0.0
    backend: str = ""
    worker_peak_rss_mb: float = 0.0  # arrow backend: largest Python worker resident memory seen


def all_pairs(domain: Domain) -> list[tuple[str, str]]:
    """Every attribute pair, in domain order."""
    attrs = domain.attrs
    return [(a, b) for i, a in enumerate(attrs) for b in attrs[i + 1:]]


def one_and_two_way(domain: Domain) -> list[tuple[str, ...]]:
    """All 1-way and all 2-way marginals of the domain."""
    return [(a,) for a in domain.attrs] + list(all_pairs(domain))


def _plan(domain: Domain, marginals: Sequence[tuple[str, ...]]) -> Any:
    """Canonicalise, drop duplicates, and split into computed tables and ones summed from them.

    A wanted table is computed unless another wanted table holds it; each one is summed from the first
    computed table holding it. Found through the subsets of each table of the sizes wanted (a few per
    table for 1- to 3-way requests), not by comparing every table with every other: linear in the requests.
    """
    wanted = list(dict.fromkeys(domain.canonical(m) for m in marginals))
    lengths = sorted({len(m) for m in wanted})
    wanted_set = set(wanted)

    def wanted_subsets(o: tuple[str, ...], proper: bool) -> Any:
        for k in lengths:
            if k > len(o) or (proper and k == len(o)):
                break
            if comb(len(o), k) > len(wanted):  # a wide table: scanning the requests is cheaper
                yield from (m for m in wanted if len(m) == k and set(m) <= set(o))
            else:
                yield from (s for s in combinations(o, k) if s in wanted_set)  # canonical: o is

    held = {s for o in wanted for s in wanted_subsets(o, proper=True)}
    computed = [m for m in wanted if m not in held]
    derived: dict[tuple[str, ...], tuple[str, ...]] = {}
    for o in computed:
        for s in wanted_subsets(o, proper=False):
            derived.setdefault(s, o)
    return wanted, computed, derived


def check_cell_cap(domain: Domain, computed: Sequence[tuple[str, ...]], max_cells: int = DEFAULT_MAX_CELLS) -> int:
    """The cells of the ``computed`` tables; raises :class:`CellCapExceeded` above ``max_cells``.

    Depends on the public domain only, so a run checks its first pass (all 1- and 2-way tables, see
    :func:`check_first_pass`) from the schema before reading anything.
    """
    cells = sum(domain.cells(m) for m in computed)
    if cells > max_cells:
        raise CellCapExceeded(_cap_message(len(computed), cells, max_cells))
    return cells


def _cap_message(tables: int, cells: int, max_cells: int) -> str:
    return (f"the {tables} requested count tables hold {cells:,} cells, above the cap of {max_cells:,}; declare "
            f"fewer values or bins, or raise the cap (--max-cells, RunConfig.max_cells)")


def first_pass_cells(domain: Domain) -> int:
    """The cells the first counting pass computes (every pair; the 1-way tables are summed from them), in O(d):
    the sum over pairs of s_a s_b is ((sum s)^2 - sum s^2) / 2 (one attribute: its own table)."""
    sizes = [int(s) for s in domain.sizes]
    return (sum(sizes) ** 2 - sum(s * s for s in sizes)) // 2 if len(sizes) > 1 else sum(sizes)


def check_first_pass(domain: Domain, max_cells: int = DEFAULT_MAX_CELLS) -> int:
    """:func:`check_cell_cap` of the first counting pass, from the sizes alone (no table list: O(d))."""
    cells = first_pass_cells(domain)
    if cells > max_cells:
        tables = len(domain) * (len(domain) - 1) // 2 or 1
        raise CellCapExceeded(_cap_message(tables, cells, max_cells))
    return cells


def _choose_backend(spark: SparkSession, backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if not backend_of(spark).jvm:
        if backend == "jvm":
            raise RuntimeError("the JVM marginal counter needs a classic SparkSession (Spark Connect has no JVM "
                               "on the client): use backend 'auto' or 'arrow'")
        log.info("Spark Connect session: counting in Python workers (the Arrow backend; the JVM counter "
                 "needs a classic session)")
        return "arrow"
    loaded = jvm_counter_loaded(spark)
    if backend == "jvm" and not loaded:
        raise RuntimeError("the JVM marginal counter is not on this session's classpath: build it with "
                           "scripts/setup.sh (needs a JDK) and start Spark with it in spark.jars / --jars")
    if backend == "auto":
        if not loaded:
            log.warning("the JVM marginal counter is not on this session's classpath (start Spark with the "
                        "package's counter jar in spark.jars / --jars): counting in Python workers, about 2x "
                        "slower")
        return "jvm" if loaded else "arrow"
    return backend


def count_marginals(encoded: EncodedTable | PackedCodes, marginals: Sequence[tuple[str, ...]],
                    recode: Mapping[str, np.ndarray] | None = None,
                    max_cells: int = DEFAULT_MAX_CELLS, backend: str = "auto") -> CountingPass:
    """Exact counts of every requested marginal in one pass over ``encoded``.

    ``encoded`` is an encoded table (packed here, lazily) or already packed codes, e.g. the run's
    persisted input (:class:`~privsyn_spark.measure.input_codes.InputCodes`), which a pass then reads as is.

    ``recode`` maps an attribute's codes to new codes (``lut[code]``), e.g. after rare-value
    merging; the tables are then over the recoded domain (sizes ``len(set)`` = ``lut.max()+1``).
    ``backend``: ``auto`` (default), ``jvm`` or ``arrow`` (see the module docstring).
    """
    domain = encoded.domain
    recode = dict(recode or {})
    for attr, lut in recode.items():
        lut = np.asarray(lut)
        if lut.shape != (domain[attr],) or lut.min(initial=0) < 0:
            raise ValueError(f"recode[{attr!r}] must map each of its {domain[attr]} codes to a code >= 0")
        domain = domain.with_size(attr, int(lut.max()) + 1)
    wanted, computed, derived = _plan(domain, marginals)
    cells = check_cell_cap(domain, computed, max_cells)
    start = time.perf_counter()
    backend = _choose_backend(encoded.df.sparkSession, backend)
    packed = encoded if isinstance(encoded, PackedCodes) else pack_codes(encoded)
    layout = packed.counter_layout(domain, computed, recode)
    peak_mb = 0.0
    if backend == "jvm":
        total = count_with_jvm(packed.df, layout)
    else:
        total, peak_mb = count_with_arrow(packed.df, layout)
    tables, rows, (out_of_domain, null_failures, not_a_number) = layout.split(total)
    for m in wanted:
        if m not in tables:
            source = derived[m]
            drop = tuple(i for i, a in enumerate(source) if a not in m)
            tables[m] = tables[source].sum(axis=drop)
    result = CountingPass(tables={m: tables[m] for m in wanted}, rows=rows, out_of_domain=out_of_domain,
                            null_failures=null_failures, not_a_number=not_a_number, seconds=time.perf_counter() - start,
                            backend=backend, worker_peak_rss_mb=peak_mb)
    # never the row count: it is a statistic of the private table (docs/privacy.md)
    log.info("counted %d marginals (%d computed, %s cells) in %.1f s (%s backend)",
             len(wanted), len(computed), f"{cells:,}", result.seconds, backend)
    return result


def check_domain_policies(encoded: EncodedTable | PackedCodes, counts: CountingPass,
                          log_exact_counts: bool = False) -> dict[str, dict[str, object]]:
    """The out-of-domain and null tallies for the run report (operators only, marked not private).

    Returns ``{column: {"out_of_domain": n, "handling": ...}}`` (a numerical column under ``clip`` also with its
    exact ``"clipped_share"``: the values outside its declared range, put in the edge bins, over the rows; and
    ``"nulls": n, "null_handling": "value"`` for nulls kept as their own code, read from the 1-way table in
    ``counts``; ``"not_a_number": n, "not_a_number_handling": "first bin"`` (or ``"fail"``) for NaN and
    unparseable numbers). Nothing here stops the run: a ``fail`` policy is a noisy check (:func:`policy_tallies`,
    :mod:`privsyn_spark.privacy.policy_checks`). The tallies read the private table, so by default no
    log line depends on them (not even on whether one is > 0); ``log_exact_counts`` logs them.
    """
    report: dict[str, dict[str, object]] = {}
    for column in (*encoded.schema.columns, *encoded.extra):  # extra: the rules' compounds
        outside = counts.out_of_domain.get(column.name, 0)
        nulls = counts.null_failures.get(column.name, 0)
        policy = str(getattr(column, "unseen", None) or getattr(column, "out_of_range", None))
        if outside:
            report[column.name] = {"out_of_domain": outside, "handling": policy}
            if column.kind == "numerical" and policy == "clip" and counts.rows:
                report[column.name]["clipped_share"] = outside / counts.rows
        one_way = counts.tables.get((column.name,))
        kept_nulls = int(one_way[column.null_code]) if column.null_code is not None and one_way is not None else 0
        if kept_nulls:
            report.setdefault(column.name, {}).update({"nulls": kept_nulls, "null_handling": "value"})
        if nulls:
            report.setdefault(column.name, {}).update({"nulls": nulls, "null_handling": "fail"})
        nan = counts.not_a_number.get(column.name, 0)
        if nan:
            report.setdefault(column.name, {}).update(
                {"not_a_number": nan, "not_a_number_handling": "fail" if policy == "fail" else "first bin"})
        if log_exact_counts and (outside or kept_nulls or nulls or nan):
            log.warning("column %r (exact, --log-exact-counts): %d values outside the declared domain (%s), "
                        "%d nulls kept as a value, %d nulls under nulls: fail, %d NaN or unparseable numbers",
                        column.name, outside, policy, kept_nulls, nulls, nan)
    log.info("domain policies applied to %d columns (tallies in the run report, operators only)",
             len(encoded.schema.columns))
    return report


def policy_tallies(encoded: EncodedTable | PackedCodes, counts: CountingPass) -> dict[str, int]:
    """The exact tally of every ``fail`` check the schema declares (:meth:`Schema.policy_checks`), zeros
    included: the input of their noisy release (:mod:`privsyn_spark.privacy.policy_checks`). A numerical
    column's NaN and unparseable values count as outside its declared domain."""
    def tally(column: str, kind: str) -> int:
        if kind == "out_of_domain":
            return counts.out_of_domain.get(column, 0) + counts.not_a_number.get(column, 0)
        return counts.null_failures.get(column, 0)

    return {name: int(tally(column, kind)) for name, (column, kind) in encoded.schema.policy_checks().items()}
