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

