"""Belief propagation and model inference against brute force over the full contingency table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import STRUCTURES, joint_from_potentials, marginal, structure

from privsyn_spark.estimate.belief_propagation import calibrate
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
    for c in theta:
        np.testing.assert_allclose(cal.probabilities(c), marginal(dom, p, c), atol=1e-12)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_model_marginal_on_any_subset(name: str) -> None:
    dom, tree, theta, p = _random_model(name, seed=1)
    model = GraphicalModel(dom, tree, theta, total=100.0)
    subsets = [s for k in (1, 2, 3) for s in itertools.combinations(dom.attrs, k)] + [dom.attrs]
    for s in subsets:
        np.testing.assert_allclose(model.marginal(s), 100.0 * marginal(dom, p, s), atol=1e-10, err_msg=str(s))

