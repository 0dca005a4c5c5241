"""The fast paths of estimation against brute force: float32 iterates, underflow fallbacks, sum order."""

from __future__ import annotations

import numpy as np
import pytest
from pgm_brute_force import STRUCTURES, exact_measurements, joint_from_potentials, marginal, random_table, structure

from privsyn_spark.estimate.belief_propagation import calibrate
from privsyn_spark.estimate.estimation import canonical_measurements, l2_loss, mirror_descent
from privsyn_spark.estimate.factor import sum_axes
from privsyn_spark.estimate.junction_tree import build_junction_tree

TOTAL = 1000.0


def _model(name: str, scale: float, seed: int):
    rng = np.random.default_rng(seed)
    dom, cliques = structure(name)
    theta = {c: rng.normal(0.0, scale, dom.shape(c)) for c in dict.fromkeys(cliques)}
    return dom, build_junction_tree(dom, cliques), theta, joint_from_potentials(dom, theta)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_float32_calibration_is_within_float32_precision(name: str) -> None:
    dom, tree, theta, p = _model(name, 1.0, seed=5)
    cal = calibrate(tree, theta, np.float32)
    assert cal.log_z == pytest.approx(calibrate(tree, theta).log_z, abs=1e-5)
    for i, clique in enumerate(tree.cliques):
        assert cal.clique_probabilities(i).dtype == np.float32
        np.testing.assert_allclose(cal.clique_probabilities(i), marginal(dom, p, clique), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_extreme_potentials_take_the_exact_fallbacks(name: str, dtype: type) -> None:
    # log-potentials spread over thousands: whole separator slices underflow unless shifted exactly
    dom, tree, theta, p = _model(name, 400.0, seed=6)
    for _ in range(2):  # the second call shifts at once the cliques whose sums underflowed in the first
        cal = calibrate(tree, theta, dtype)
        for i, clique in enumerate(tree.cliques):
            np.testing.assert_allclose(cal.clique_probabilities(i), marginal(dom, p, clique), atol=1e-6)


@pytest.mark.parametrize("name", ["six_attrs", "cycle", "three_way"])
def test_float32_mirror_descent_fits_as_float64_does(name: str) -> None:
    dom, cliques = structure(name)
    table = random_table(dom, TOTAL, np.random.default_rng(3))
    measured = exact_measurements(dom, table, cliques)
    fast = mirror_descent(measured, dom, TOTAL, max_iters=400, tol=0.0, float32_above=0)
    exact = mirror_descent(measured, dom, TOTAL, max_iters=400, tol=0.0, float32_above=None)
    for m in measured:
        np.testing.assert_allclose(fast.model.marginal(m.attrs), m.values, atol=1e-2 * TOTAL)
        np.testing.assert_allclose(fast.model.marginal(m.attrs), exact.model.marginal(m.attrs), atol=2e-3 * TOTAL)
    # the returned model and loss are float64: the loss is that of the model's own marginals
    mu = {c: fast.model.marginal(c) for c in dict.fromkeys(dom.canonical(m.attrs) for m in measured)}
    assert fast.loss == pytest.approx(l2_loss(canonical_measurements(measured, dom), mu)[0], rel=1e-9)
    assert fast.loss < 1e-3 * fast.loss_history[0]


@pytest.mark.parametrize("seed", range(20))
def test_sum_axes_equals_numpy_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 8))))
    values = rng.random(shape)
    axes = tuple(int(a) for a in np.flatnonzero(rng.random(len(shape)) < 0.6))
    np.testing.assert_allclose(sum_axes(values, axes), values.sum(axis=axes), rtol=1e-12)
