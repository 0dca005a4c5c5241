"""Belief propagation and model inference against brute force over the full contingency table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import STRUCTURES, joint_from_potentials, marginal, structure

from privsyn_spark.domain import Domain
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



def test_a_pair_in_no_clique_is_carried_along_a_long_path_through_empty_cells() -> None:
    """Pairs inside no clique (a .. h: six cliques apart) against brute force, with a value held at no mass
    so that separators have cells of probability 0."""
    rng = np.random.default_rng(7)
    sizes = dict(zip("abcdefgh", (2, 3, 2, 3, 2, 3, 2, 3)))
    dom = Domain.from_dict(sizes)
    cliques = [tuple("abcdefgh"[k:k + 3]) for k in range(6)]
    theta = {c: rng.normal(0.0, 1.0, dom.shape(c)) for c in cliques}
    theta[("c", "d", "e")][0] = -800.0  # c = 0 at no mass: exp underflows to exactly 0
    model = GraphicalModel(dom, build_junction_tree(dom, cliques), theta, total=100.0)
    p = joint_from_potentials(dom, theta)
    assert marginal(dom, p, ("c",))[0] == 0.0
    for pair in [("a", "h"), ("a", "e"), ("b", "g"), ("c", "h"), ("a", "d")]:
        assert model.tree.containing(pair) is None
        np.testing.assert_allclose(model.marginal(pair), 100.0 * marginal(dom, p, pair), atol=1e-10, err_msg=str(pair))
