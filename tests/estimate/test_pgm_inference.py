"""Belief propagation and model inference against brute force over the full contingency table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import STRUCTURES, joint_from_potentials, marginal, structure

from privsyn_spark.estimate.belief_propagation import calibrate, marginal_oracle
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.estimate.model import GraphicalModel


def _random_model(name: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    dom, cliques = structure(name)
    theta = {c: rng.normal(0.0, 1.0, dom.shape(c)) for c in dict.fromkeys(cliques)}
    tree = build_junction_tree(dom, cliques)
    return dom, tree, theta, joint_from_potentials(dom, theta)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_bp_marginals_equal_exact_marginals(name: str) -> None:
    dom, tree, theta, p = _random_model(name)
    cal = calibrate(tree, theta)
    for i, clique in enumerate(tree.cliques):
        np.testing.assert_allclose(cal.clique_probabilities(i), marginal(dom, p, clique), atol=1e-12)
    for c, mu in marginal_oracle(tree, theta, total=7.0).items():
        np.testing.assert_allclose(mu, 7.0 * marginal(dom, p, c), atol=1e-11)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_model_marginal_on_any_subset(name: str) -> None:
    dom, tree, theta, p = _random_model(name, seed=1)
    model = GraphicalModel(dom, tree, theta, total=100.0)
    subsets = [s for k in (1, 2, 3) for s in itertools.combinations(dom.attrs, k)] + [dom.attrs]
    for s in subsets:
        np.testing.assert_allclose(model.marginal(s), 100.0 * marginal(dom, p, s), atol=1e-10, err_msg=str(s))


def test_range_queries_match_brute_force() -> None:
    dom, tree, theta, p = _random_model("six_attrs", seed=2)
    model = GraphicalModel(dom, tree, theta, total=1000.0)
    queries = [{"a": (0, 0), "d": (1, 2), "f": (0, 1)}, {"b": (1, 2)}, {"a": (1, 1), "c": (0, 1), "e": (1, 1)}]
    expected = []
    for q in queries:
        index = tuple(slice(q[a][0], q[a][1] + 1) if a in q else slice(None) for a in dom.attrs)
        expected.append(1000.0 * p[index].sum())
    np.testing.assert_allclose(model.range_queries(queries), expected, rtol=1e-10)
    assert model.range_query(queries[0]) == pytest.approx(expected[0], rel=1e-10)


@pytest.mark.parametrize("seed", range(20))
def test_long_tail_broadcasting_gives_the_same_values_bit_for_bit(seed: int) -> None:
    """Merging short trailing axes into one long inner loop (expanding parts there) changes nothing."""
    from privsyn_spark.estimate.belief_propagation import _collapsed, _scale, _with_long_tail

    rng = np.random.default_rng(seed)
    full = tuple(int(n) for n in rng.integers(2, 12, size=int(rng.integers(3, 7))))
    shapes = [tuple(n if rng.random() < 0.5 else 1 for n in full) for _ in range(int(rng.integers(1, 4)))]
    parts = [rng.random(s).astype(np.float32) for s in shapes]
    expected = np.ones(full, dtype=np.float32)
    for p in parts:
        expected = expected * p
    merged, collapsed = _collapsed(full, tuple(shapes))
    tail_shape, tailed = _with_long_tail(merged, [p.reshape(s) for p, s in zip(parts, collapsed)])
    out = np.ones(tail_shape, dtype=np.float32)
    for p in tailed:
        np.multiply(out, p, out=out)
    assert np.array_equal(out.reshape(full), expected)
    table = rng.random(full).astype(np.float32)
    scaled = table.copy()
    _scale(scaled, parts[0])
    assert np.array_equal(scaled, table * parts[0])


def test_long_tail_merges_a_short_last_axis() -> None:
    """A 3-value last axis behind broadcast axes: the inner loop becomes >= TAIL cells long."""
    from privsyn_spark.estimate.belief_propagation import TAIL, _with_long_tail

    full = (40, 30, 11, 3)
    parts = [np.ones((40, 30, 11, 3)), np.ones((1, 30, 1, 3)), np.ones((1, 1, 11, 1))]
    shape, tailed = _with_long_tail(full, parts)
    assert shape == (40, 990) and TAIL <= 990 and [p.shape for p in tailed] == [(40, 990), (1, 990), (1, 990)]
    big = [np.ones((40, 30, 11, 3)), np.ones((40, 30, 1, 3))]  # expanding would copy the whole table
    assert _with_long_tail(full, big) == (full, big)
