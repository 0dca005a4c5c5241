"""Estimation against brute force: noise-free recovery, monotone loss, maximum entropy."""

from __future__ import annotations

import numpy as np
import pytest
from pgm_brute_force import (
    STRUCTURES,
    exact_measurements,
    max_entropy_fit,
    noisy_measurements,
    random_table,
    structure,
)

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.estimation import (
    Estimator,
    MirrorDescent,
    estimate_total,
    mirror_descent,
)
from privsyn_spark.privacy.measurements import NoisyMarginal

TOTAL = 1000.0


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_noise_free_measurements_are_recovered_with_maximum_entropy(name: str) -> None:
    dom, cliques = structure(name)
    table = random_table(dom, TOTAL, np.random.default_rng(3))
    measured = exact_measurements(dom, table, cliques, sigmas=[1.0 + k for k in range(len(cliques))])
    result = mirror_descent(measured, dom, TOTAL, max_iters=3000, tol=1e-12)
    model = result.model
    for m in measured:
        np.testing.assert_allclose(model.marginal(m.attrs), m.values, atol=1e-4 * TOTAL, err_msg=str(m.attrs))
    # where the measurements leave the table open, the model is the maximum-entropy table (IPF from uniform)
    ipf = max_entropy_fit(dom, [(m.attrs, m.values) for m in measured])
    np.testing.assert_allclose(model.marginal(dom.attrs), ipf, atol=1e-3 * TOTAL)


@pytest.mark.parametrize("name", sorted(STRUCTURES))
@pytest.mark.parametrize("line_search", [True, False])
def test_loss_is_non_increasing(name: str, line_search: bool) -> None:
    rng = np.random.default_rng(4)
    dom, cliques = structure(name)
    table = random_table(dom, TOTAL, rng)
    measured = noisy_measurements(dom, table, cliques, [5.0 * (k + 1) for k in range(len(cliques))], rng)
    result = mirror_descent(measured, dom, TOTAL, max_iters=150, tol=0.0, line_search=line_search)
    history = np.array(result.loss_history)
    assert len(history) > 10
    assert np.all(np.diff(history) <= 1e-9 * history[:-1])
    assert history[-1] < history[0]


def test_two_disjoint_one_way_measurements_give_the_product() -> None:
    dom = Domain.from_dict({"a": 3, "b": 4})
    ya = np.array([100.0, 300.0, 600.0])
    yb = np.array([250.0, 250.0, 400.0, 100.0])
    measured = [NoisyMarginal(("a",), ya, 2.0, 0.125), NoisyMarginal(("b",), yb, 1.0, 0.5)]
    model = mirror_descent(measured, dom, 1000.0, max_iters=500, tol=1e-12).model
    np.testing.assert_allclose(model.marginal(("a", "b")), np.outer(ya, yb) / 1000.0, atol=1e-6)


def test_duplicate_measurements_average_by_inverse_variance() -> None:
    dom = Domain.from_dict({"a": 2, "b": 3})
    y1 = np.array([[100.0, 200.0, 50.0], [150.0, 300.0, 200.0]])
    y2 = np.array([[120.0, 180.0, 70.0], [140.0, 290.0, 200.0]])
    s1, s2 = 1.0, 2.0
    measured = [NoisyMarginal(("a", "b"), y1, s1, 0.5), NoisyMarginal(("a", "b"), y2, s2, 0.125)]
    total = estimate_total(measured)
    expected = (y1 / s1**2 + y2 / s2**2) / (1 / s1**2 + 1 / s2**2)
    assert total == pytest.approx(expected.sum())
    model = mirror_descent(measured, dom, None, max_iters=2000, tol=1e-14).model
    np.testing.assert_allclose(model.marginal(("a", "b")), expected, atol=1e-6)


def test_measurement_axes_in_any_order() -> None:
    dom = Domain.from_dict({"a": 2, "b": 3})
    y = np.array([[100.0, 200.0, 50.0], [150.0, 300.0, 200.0]])
    measured = [NoisyMarginal(("b", "a"), y.T.copy(), 1.0, 0.5)]
    model = mirror_descent(measured, dom, float(y.sum()), max_iters=2000, tol=1e-14).model
    np.testing.assert_allclose(model.marginal(("a", "b")), y, atol=1e-6)


def test_estimators_follow_the_protocol() -> None:
    dom, cliques = structure("tree")
    table = random_table(dom, TOTAL, np.random.default_rng(6))
    measured = exact_measurements(dom, table, cliques)
    estimators: list[Estimator] = [MirrorDescent(max_iters=50)]
    uniform = sum(float(np.sum(((TOTAL / m.values.size - m.values) / m.sigma) ** 2)) for m in measured)
    for est in estimators:
        result = est.estimate(measured, dom, TOTAL)
        fitted = {m.attrs: result.model.marginal(m.attrs) for m in measured}
        # the reported loss is the returned model's loss (Private-PGM's L2 loss), far below the uniform table's
        loss = sum(float(np.sum(((fitted[m.attrs] - m.values) / m.sigma) ** 2)) for m in measured)
        assert result.loss == pytest.approx(loss, rel=1e-6)
        assert loss < 1e-3 * uniform
        for m in measured:  # the model is a distribution of TOTAL records
            assert float(fitted[m.attrs].sum()) == pytest.approx(TOTAL, rel=1e-9)
        assert 1 <= result.iterations <= 60


def test_line_search_discards_only_steps_that_raise_the_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    # every oracle call's loss is recorded: a candidate step that lowered the loss is kept even when it
    # misses the Armijo condition, so the only calls not in the loss history are the loss-raising ones
    from privsyn_spark.estimate import estimation

    seen: list[float] = []
    real_loss = estimation.l2_loss

    def recording(measurements, mu):
        loss, grad = real_loss(measurements, mu)
        seen.append(loss)
        return loss, grad

    monkeypatch.setattr(estimation, "l2_loss", recording)
    rng = np.random.default_rng(7)
    dom, cliques = structure("six_attrs")
    table = random_table(dom, TOTAL, rng)
    measured = noisy_measurements(dom, table, cliques, [3.0 * (k + 1) for k in range(len(cliques))], rng)
    result = mirror_descent(measured, dom, TOTAL, max_iters=200, tol=0.0, float32_above=None)
    history = result.loss_history
    assert seen[0] == history[0] and len(seen) == result.info["oracle_calls"]
    accepted, discarded = 1, 0
    for loss in seen[1:]:
        if accepted < len(history) and loss == history[accepted]:
            accepted += 1
        else:
            assert loss >= history[accepted - 1]  # retried only because it raised the loss
            discarded += 1
    assert accepted == len(history) and discarded > 0  # the search did try steps too large
