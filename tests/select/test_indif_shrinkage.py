"""Tweedie shrinkage of the noisy InDif scores: the binned kernel slope against the exact sum, and what it
does to DenseMarg's picks on scores with a known truth."""

from __future__ import annotations

import numpy as np

from privsyn_spark.select.densemarg import dense_marg
from privsyn_spark.select.indif_shrinkage import BANDWIDTH, log_density_slope, shrink_scores


def _scores(rng: np.random.Generator, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """276 pairs: 264 independent (true InDif ~ 200 counts) and 12 dependent (3,000-30,000), and their noisy scores."""
    truth = np.concatenate([rng.uniform(100, 300, 264), rng.uniform(3_000, 30_000, 12)])
    return truth, truth + rng.normal(0, sigma, truth.size)


def test_the_binned_slope_is_the_exact_kernel_sum() -> None:
    rng = np.random.default_rng(3)
    for sigma in (50.0, 2_000.0):
        _, noisy = _scores(rng, sigma)
        h = BANDWIDTH * sigma
        u = (noisy[:, None] - noisy[None, :]) / h
        k = np.exp(-0.5 * u * u)
        exact = -(u * k).sum(1) / (h * k.sum(1))
        assert np.max(np.abs(log_density_slope(noisy, h) - exact)) <= 0.01 * np.max(np.abs(exact))


def test_shrinkage_pulls_the_noise_crowd_in_and_never_goes_below_zero() -> None:
    sigma = 2_000.0
    raw_error, shrunk_error = [], []
    for seed in range(20):
        truth, noisy = _scores(np.random.default_rng(seed), sigma)
        pairs = [(f"a{i}", f"b{i}") for i in range(truth.size)]
        shrunk = np.array(list(shrink_scores(dict(zip(pairs, noisy)), sigma).values()))
        assert shrunk.min() >= 0.0
        raw_error.append(np.mean((noisy[:264] - truth[:264]) ** 2))
        shrunk_error.append(np.mean((shrunk[:264] - truth[:264]) ** 2))
    assert np.mean(shrunk_error) < 0.1 * np.mean(raw_error)


def test_densemarg_on_shrunk_scores_takes_the_dependent_pairs_and_fewer_of_the_noise_draws() -> None:
    sigma, rho = 2_000.0, 0.005
    cells = {(f"a{i}", f"b{i}"): 9 for i in range(276)}
    raw_null, shrunk_null, shrunk_dependent = [], [], []
    for seed in range(20):
        _, noisy = _scores(np.random.default_rng(100 + seed), sigma)
        pairs = list(cells)
        raw = dense_marg(dict(zip(pairs, noisy)), cells, rho).pairs
        shrunk = dense_marg(shrink_scores(dict(zip(pairs, noisy)), sigma), cells, rho).pairs
        null = set(pairs[:264])
        raw_null.append(sum(p in null for p in raw))
        shrunk_null.append(sum(p in null for p in shrunk))
        shrunk_dependent.append(sum(p not in null for p in shrunk))
    assert np.mean(raw_null) > 40  # the winner's curse: the raw scores take dozens of independent pairs
    assert np.mean(shrunk_null) < 0.5 * np.mean(raw_null)
    assert np.mean(shrunk_dependent) > 11.5  # and nearly every dependent one (of 12)


def test_no_noise_or_one_score_is_returned_as_released() -> None:
    assert shrink_scores({("a", "b"): 5.0, ("a", "c"): -1.0}, 0.0) == {("a", "b"): 5.0, ("a", "c"): 0.0}
    assert shrink_scores({("a", "b"): 7.5}, 100.0) == {("a", "b"): 7.5}
