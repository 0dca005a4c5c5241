"""Sampling records from the model: empirical marginals of 10^5 records against the model's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import joint_from_potentials, marginal, structure

from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.estimate.model import GraphicalModel

N = 100_000


@pytest.mark.parametrize("name", ["tree", "cycle", "unmeasured", "six_attrs"])
def test_sampled_marginals_match_the_model(name: str) -> None:
    rng = np.random.default_rng(7)
    dom, cliques = structure(name)
    theta = {c: rng.normal(0.0, 1.0, dom.shape(c)) for c in dict.fromkeys(cliques)}
    model = GraphicalModel(dom, build_junction_tree(dom, cliques), theta, total=float(N))
    records = model.sample(rng=rng)
    assert records.shape == (N, len(dom)) and records.dtype == np.int64
    for k, a in enumerate(dom.attrs):
        assert records[:, k].min() >= 0 and records[:, k].max() < dom[a]
    empirical = np.zeros(dom.shape())
    np.add.at(empirical, tuple(records.T), 1.0)
    p = joint_from_potentials(dom, theta)
    # systematic rounding: every junction-tree clique's counts within a few records of the model
    for clique in model.tree.cliques:
        assert np.abs(marginal(dom, empirical, clique) - model.marginal(clique)).max() <= 3.0
    # attribute pairs, including pairs in no clique: within sampling tolerance
    for pair in itertools.combinations(dom.attrs, 2):
        assert np.abs(marginal(dom, empirical, pair) / N - marginal(dom, p, pair)).max() < 0.01, pair
    # the whole table: total variation distance small
    assert 0.5 * np.abs(empirical / N - p).sum() < 0.05


def test_sample_size_and_determinism() -> None:
    dom, cliques = structure("chain")
    rng = np.random.default_rng(8)
    theta = {c: rng.normal(size=dom.shape(c)) for c in cliques}
    model = GraphicalModel(dom, build_junction_tree(dom, cliques), theta, total=123.4)
    assert model.sample(rng=np.random.default_rng(0)).shape == (123, 4)
    a = model.sample(5000, np.random.default_rng(1))
    b = model.sample(5000, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="rng"):
        model.sample(10)
