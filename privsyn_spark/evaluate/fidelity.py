"""Fidelity of a synthetic table to the real one: marginal TVD and PrivSyn's range queries.

Both tables are encoded with the same schema and counted by the marginal engine, one pass per
table for everything (all 1-way and 2-way tables and the 3-way tables the queries need); only count
tables reach the driver. These numbers read the private table: they are not differentially private.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.measure.encode import EncodedTable
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS, CountingPass, all_pairs, count_marginals

log = logging.getLogger(__name__)

Tables = Mapping[tuple[str, ...], np.ndarray]


def tvd(real: np.ndarray, synthetic: np.ndarray) -> float:
    """Total-variation distance: half the L1 distance of the normalised count tables.

    An empty table is at distance 1 from a non-empty one and 0 from another empty one.
    """
    real, synthetic = np.asarray(real, dtype=np.float64), np.asarray(synthetic, dtype=np.float64)
    n_real, n_synth = real.sum(), synthetic.sum()
    if n_real == 0 or n_synth == 0:
        return 0.0 if n_real == n_synth else 1.0
    return float(0.5 * np.abs(real / n_real - synthetic / n_synth).sum())


def marginal_tvds(real: Tables, synthetic: Tables,
                  marginals: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """TVD of each marginal (keys as given; both table sets keyed by the same canonical tuples)."""
    return {m: tvd(real[m], synthetic[m]) for m in marginals}


def tvd_summary(real: Tables, synthetic: Tables, domain: Domain, worst: int = 10) -> dict:
    """Average TVD over all 1-way and all 2-way marginals, the ``worst`` pairs and the pair matrix."""
    ones = marginal_tvds(real, synthetic, [(a,) for a in domain.attrs])
    pairs = marginal_tvds(real, synthetic, all_pairs(domain))
    index = {a: i for i, a in enumerate(domain.attrs)}
    matrix = np.full((len(domain), len(domain)), np.nan)
    for (a, b), value in pairs.items():
        matrix[index[a], index[b]] = matrix[index[b], index[a]] = value
    ranked = sorted(pairs.items(), key=lambda kv: -kv[1])[:worst]
    return {
        "tvd_1way_mean": float(np.mean(list(ones.values()))),
        "tvd_1way_max": float(max(ones.values())),
        "tvd_1way": {m[0]: v for m, v in ones.items()},
        "tvd_2way_mean": float(np.mean(list(pairs.values()))) if pairs else None,
        "tvd_2way_max": float(max(pairs.values())) if pairs else None,
        "worst_pairs": [{"attrs": list(m), "tvd": v} for m, v in ranked],
        "tvd_2way_matrix": {"attrs": list(domain.attrs), "values": matrix.tolist()},  # NaN on the diagonal
    }


@dataclass(frozen=True)
class RangeQueries:
    """Queries over attribute triples: ``triples[query_set[q]]`` with inclusive code bounds per axis."""

    triples: list[tuple[str, ...]]  # canonical (domain order); the axes of lower/upper follow it
    query_set: np.ndarray  # (n,) index into triples
    lower: np.ndarray  # (n, width) int64, inclusive
    upper: np.ndarray  # (n, width) int64, inclusive
    capped: bool = False
    note: str = ""

    def __len__(self) -> int:
        return len(self.query_set)


def draw_range_queries(domain: Domain, n: int, rng: np.random.Generator, max_cells: int = DEFAULT_MAX_CELLS,
                       width: int = 3) -> RangeQueries:
    """``n`` random range queries as in PrivSyn's evaluation, over ``width`` attributes each.

    Each query picks ``width`` distinct attributes uniformly, then per attribute an interval of
    codes between two uniform codes. If the distinct triples' count tables exceed ``max_cells``,
    a random subset of triples that fits is kept and the other queries are redrawn over it
    (``capped`` and ``note`` say so).
    """
    width = min(width, len(domain))
    attrs = np.array(domain.attrs, dtype=object)
    picks = [domain.canonical(attrs[rng.choice(len(domain), width, replace=False)]) for _ in range(n)]
    triples = list(dict.fromkeys(picks))
    cells = {t: domain.cells(t) for t in triples}
    capped, note = False, ""
    if sum(cells.values()) > max_cells:
        kept, used = [], 0
        for i in rng.permutation(len(triples)):
            if used + cells[triples[i]] <= max_cells:
                kept.append(triples[i])
                used += cells[triples[i]]
        capped = True
        note = (f"the {len(triples)} distinct attribute triples of {n} queries hold {sum(cells.values()):,} cells, "
                f"above the cap of {max_cells:,}; queries were redrawn over {len(kept)} random triples "
                f"({used:,} cells)")
        log.warning("range queries: %s", note)
        if not kept:
            empty = np.zeros((0, width), dtype=np.int64)
            return RangeQueries([], np.zeros(0, dtype=np.int64), empty, empty, True, note)
        keep = set(kept)
        triples = [t for t in triples if t in keep]  # first-drawn order
        picks = [p if p in keep else triples[rng.integers(len(triples))] for p in picks]
    position = {t: i for i, t in enumerate(triples)}
    query_set = np.array([position[p] for p in picks], dtype=np.int64)
    sizes = np.array([domain.shape(p) for p in picks], dtype=np.int64).reshape(n, width)
    ends = rng.integers(0, sizes[..., None], size=(n, width, 2))  # two uniform codes per axis
    return RangeQueries(triples, query_set, ends.min(axis=2), ends.max(axis=2), capped, note)


def answer_range_queries(tables: Tables, rows: int, queries: RangeQueries) -> np.ndarray:
    """The fraction of ``rows`` inside each query's box, read from the 3-way count tables."""
    answers = np.zeros(len(queries), dtype=np.float64)
    if rows == 0:
        return answers
    for q in range(len(queries)):
        table = tables[queries.triples[queries.query_set[q]]]
        box = tuple(slice(lo, hi + 1) for lo, hi in zip(queries.lower[q], queries.upper[q]))
        answers[q] = table[box].sum() / rows
    return answers


def range_query_error(real: CountingPass, synthetic: CountingPass, queries: RangeQueries) -> dict:
    """Average (and largest) absolute error of the synthetic table's answered fractions."""
    result = {"queries": len(queries), "triples": len(queries.triples), "capped": queries.capped,
              "note": queries.note, "mean_abs_error": None, "max_abs_error": None}
    if len(queries):
        error = np.abs(answer_range_queries(real.tables, real.rows, queries)
                       - answer_range_queries(synthetic.tables, synthetic.rows, queries))
        result.update(mean_abs_error=float(error.mean()), max_abs_error=float(error.max()))
    return result


@dataclass(frozen=True)
class FidelityResult:
    """Metrics (``rows``, ``tvd``, ``range_queries``), the count tables they came from and the queries."""

    metrics: dict
    real: CountingPass
    synthetic: CountingPass
    queries: RangeQueries


def fidelity(real: EncodedTable, synthetic: EncodedTable, n_queries: int = 1000,
             rng: np.random.Generator | None = None, max_cells: int = DEFAULT_MAX_CELLS,
             worst: int = 10) -> FidelityResult:
    """TVD summary and range-query error of ``synthetic`` against ``real`` (one engine pass each).

    The range queries get the cell budget left after the 1-way and 2-way tables.
    """
    if real.domain != synthetic.domain:
        raise ValueError("fidelity: the two tables were encoded with different domains")
    domain = real.domain
    rng = np.random.default_rng(0) if rng is None else rng
    base: list[tuple[str, ...]] = list(all_pairs(domain)) or [(a,) for a in domain.attrs]
    base_cells = sum(domain.cells(m) for m in base)  # an upper bound: pairs inside a triple are summed from it
    queries = draw_range_queries(domain, n_queries, rng, max(max_cells - base_cells, 0))
    wanted = [(a,) for a in domain.attrs] + all_pairs(domain) + queries.triples
    real_counts = count_marginals(real, wanted, max_cells=max_cells)
    synth_counts = count_marginals(synthetic, wanted, max_cells=max_cells)
    metrics = {"rows": {"real": real_counts.rows, "synthetic": synth_counts.rows},
               "tvd": tvd_summary(real_counts.tables, synth_counts.tables, domain, worst),
               "range_queries": range_query_error(real_counts, synth_counts, queries)}
    return FidelityResult(metrics, real_counts, synth_counts, queries)
