"""Fidelity metrics (TVD, range queries) against numpy/pandas brute force on rows."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.evaluate.fidelity import (
    answer_range_queries,
    draw_range_queries,
    fidelity,
    tvd,
    tvd_summary,
)
from tests.reference import crosstab, encode_pandas

from .small_tables import SCHEMA

DOMAIN = Domain(("a", "b", "c", "d", "e"), (3, 5, 2, 7, 4))


def random_codes(rng, n, domain=DOMAIN):
    return pd.DataFrame({a: rng.integers(0, s, n) for a, s in domain.to_dict().items()})


def brute_tvd(real: pd.DataFrame, synth: pd.DataFrame, attrs) -> float:
    p = real.groupby(list(attrs)).size() / len(real)
    q = synth.groupby(list(attrs)).size() / len(synth)
    return 0.5 * p.sub(q, fill_value=0).abs().sum()


def brute_answers(codes: pd.DataFrame, queries) -> np.ndarray:
    """Each query's fraction by masking rows (no count tables)."""
    out = []
    for q in range(len(queries)):
        attrs = queries.triples[queries.query_set[q]]
        mask = np.ones(len(codes), dtype=bool)
        for a, lo, hi in zip(attrs, queries.lower[q], queries.upper[q]):
            mask &= (codes[a].to_numpy() >= lo) & (codes[a].to_numpy() <= hi)
        out.append(mask.mean())
    return np.array(out)


def test_tvd_definition():
    assert tvd(np.array([2, 2]), np.array([1, 1])) == 0.0
    assert tvd(np.array([1, 0]), np.array([0, 5])) == 1.0
    assert tvd(np.array([3, 1]), np.array([1, 1])) == pytest.approx(0.25)
    assert tvd(np.zeros(3), np.zeros(3)) == 0.0 and tvd(np.zeros(3), np.ones(3)) == 1.0


def test_tvd_summary_equals_pandas():
    rng = np.random.default_rng(1)
    real, synth = random_codes(rng, 500), random_codes(rng, 300)
    tables = {}
    for name, codes in (("real", real), ("synth", synth)):
        tables[name] = {m: crosstab(codes, m, DOMAIN.shape(m))
                        for k in (1, 2) for m in combinations(DOMAIN.attrs, k)}
    summary = tvd_summary(tables["real"], tables["synth"], DOMAIN, worst=3)
    pairs = {p: brute_tvd(real, synth, p) for p in combinations(DOMAIN.attrs, 2)}
    ones = {a: brute_tvd(real, synth, [a]) for a in DOMAIN.attrs}
    assert summary["tvd_1way"] == pytest.approx(ones, abs=1e-12)
    assert summary["tvd_1way_mean"] == pytest.approx(np.mean(list(ones.values())), abs=1e-12)
    assert summary["tvd_2way_mean"] == pytest.approx(np.mean(list(pairs.values())), abs=1e-12)
    assert summary["tvd_2way_max"] == pytest.approx(max(pairs.values()), abs=1e-12)
    worst = sorted(pairs, key=pairs.get, reverse=True)[:3]
    assert [tuple(w["attrs"]) for w in summary["worst_pairs"]] == worst
    matrix = np.array(summary["tvd_2way_matrix"]["values"])
    assert np.isnan(np.diag(matrix)).all()
    assert matrix[0, 3] == matrix[3, 0] == pytest.approx(pairs[("a", "d")], abs=1e-12)


def test_range_queries_are_seeded_valid_and_answered_exactly():
    queries = draw_range_queries(DOMAIN, 1000, np.random.default_rng(7))
    again = draw_range_queries(DOMAIN, 1000, np.random.default_rng(7))
    assert queries.triples == again.triples and np.array_equal(queries.lower, again.lower)
    assert len(queries) == 1000 and not queries.capped and queries.note == ""
    assert len(queries.triples) == 10  # all C(5, 3) triples get drawn
    for q in range(len(queries)):
        triple = queries.triples[queries.query_set[q]]
        assert len(set(triple)) == 3 and triple == DOMAIN.canonical(triple)
        assert np.all(queries.lower[q] >= 0) and np.all(queries.lower[q] <= queries.upper[q])
        assert np.all(queries.upper[q] < np.array(DOMAIN.shape(triple)))
    codes = random_codes(np.random.default_rng(2), 400)
    tables = {t: crosstab(codes, t, DOMAIN.shape(t)) for t in queries.triples}
    np.testing.assert_allclose(answer_range_queries(tables, len(codes), queries), brute_answers(codes, queries),
                               rtol=0, atol=1e-12)


def test_range_queries_respect_the_cell_cap():
    full = draw_range_queries(DOMAIN, 1000, np.random.default_rng(7))
    cap = sum(DOMAIN.cells(t) for t in full.triples) // 3
    capped = draw_range_queries(DOMAIN, 1000, np.random.default_rng(7), max_cells=cap)
    assert capped.capped and "cap" in capped.note and len(capped) == 1000
    assert 0 < len(capped.triples) < len(full.triples)
    assert sum(DOMAIN.cells(t) for t in capped.triples) <= cap
    assert set(np.unique(capped.query_set)) == set(range(len(capped.triples)))
    nothing = draw_range_queries(DOMAIN, 10, np.random.default_rng(7), max_cells=5)
    assert nothing.capped and len(nothing) == 0 and nothing.triples == []


@pytest.mark.slow
def test_fidelity_on_spark_equals_brute_force(small_tables):
    real, synth = small_tables.real, small_tables.synth
    real_codes = encode_pandas(small_tables.real_frame, SCHEMA)
    synth_codes = encode_pandas(small_tables.synth_frame, SCHEMA)
    domain = SCHEMA.domain()

    result = fidelity(real, synth, n_queries=300, rng=np.random.default_rng(5), worst=4)
    metrics = result.metrics
    assert metrics["rows"] == {"real": 3000, "synthetic": 2000}
    ones = {a: brute_tvd(real_codes, synth_codes, [a]) for a in domain.attrs}
    pairs = {p: brute_tvd(real_codes, synth_codes, p) for p in combinations(domain.attrs, 2)}
    assert metrics["tvd"]["tvd_1way"] == pytest.approx(ones, abs=1e-12)
    assert metrics["tvd"]["tvd_2way_mean"] == pytest.approx(np.mean(list(pairs.values())), abs=1e-12)
    assert metrics["tvd"]["worst_pairs"][0]["tvd"] == pytest.approx(max(pairs.values()), abs=1e-12)
    assert metrics["tvd"]["tvd_1way"]["const"] == 0.0
    queries = result.queries
    error = np.abs(brute_answers(real_codes, queries) - brute_answers(synth_codes, queries))
    rq = metrics["range_queries"]
    assert rq["queries"] == 300 and rq["triples"] == len(queries.triples) == 10 and not rq["capped"]
    assert rq["mean_abs_error"] == pytest.approx(error.mean(), abs=1e-12) and rq["mean_abs_error"] > 0
    assert rq["max_abs_error"] == pytest.approx(error.max(), abs=1e-12)

    # a cap that leaves room for only some triples: fewer distinct triples, said so, still exact
    base = sum(domain.cells(p) for p in combinations(domain.attrs, 2))
    capped = fidelity(real, synth, n_queries=300, rng=np.random.default_rng(5), max_cells=base + 300, worst=4)
    rq = capped.metrics["range_queries"]
    assert rq["capped"] and "cap" in rq["note"] and 0 < rq["triples"] < 10 and rq["queries"] == 300
    error = np.abs(brute_answers(real_codes, capped.queries) - brute_answers(synth_codes, capped.queries))
    assert rq["mean_abs_error"] == pytest.approx(error.mean(), abs=1e-12)
    assert capped.metrics["tvd"]["tvd_1way"] == metrics["tvd"]["tvd_1way"]
    assert capped.metrics["tvd"]["worst_pairs"] == metrics["tvd"]["worst_pairs"]


@pytest.mark.slow
def test_identical_tables_have_zero_tvd_and_range_error(small_tables):
    metrics = fidelity(small_tables.real, small_tables.real, n_queries=200, rng=np.random.default_rng(0)).metrics
    assert metrics["tvd"]["tvd_1way_mean"] == metrics["tvd"]["tvd_2way_max"] == 0.0
    assert metrics["range_queries"]["mean_abs_error"] == metrics["range_queries"]["max_abs_error"] == 0.0
