"""The report's 1-way fit (estimate.one_way_fit) and the shrunk shares of merged values (estimate.merged_shares)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.merged_shares import shrink_groups
from privsyn_spark.estimate.one_way_fit import OFF_RATIO, one_way_fit
from privsyn_spark.privacy.measurements import NoisyMarginal


def _fit(target_a, noisy_a, sigma=2.0, total=100.0):
    domain = Domain.from_dict({"a": 3, "b": 2})
    tables = {("a", "b"): np.outer(target_a, [0.5, 0.5])}
    marginals = [NoisyMarginal(("a",), np.asarray(noisy_a, float), sigma, 0.1),
                 NoisyMarginal(("b",), np.array([50.0, 50.0]), sigma, 0.1),
                 NoisyMarginal(("a", "b"), np.outer(noisy_a, [0.5, 0.5]), sigma, 0.1)]
    return one_way_fit(tables, marginals, domain, total)


def test_one_way_fit_against_brute_force():
    fit = _fit([20.0, 30.0, 50.0], [30.0, 30.0, 40.0])
    # a: p = (.3, .3, .4), q = (.2, .3, .5): TVD 0.1; b: targets (50, 50) vs noisy (50, 50): 0
    assert fit["attributes"]["a"]["tvd"] == pytest.approx(0.1)
    assert fit["attributes"]["b"]["tvd"] == pytest.approx(0.0)
    noise_a = 3 * 2.0 * math.sqrt(2 / math.pi) / 200.0
    assert fit["attributes"]["a"]["noise_tvd"] == pytest.approx(noise_a)
    assert fit["attributes"]["a"]["ratio"] == pytest.approx(0.1 / noise_a)
    assert fit["mean_tvd"] == pytest.approx(0.05) and fit["max_tvd"] == pytest.approx(0.1)
    assert fit["worst"] == ["a", "b"] and fit["off"] == ["a"]  # 0.1 is > OFF_RATIO x 0.024


def test_one_way_fit_within_noise_is_not_off():
    fit = _fit([30.0, 30.0, 40.0], [31.0, 29.0, 40.0])
    assert fit["attributes"]["a"]["ratio"] < OFF_RATIO and fit["off"] == []


def test_negative_noisy_counts_are_clipped():
    fit = _fit([0.0, 50.0, 50.0], [-5.0, 50.0, 50.0])
    assert fit["attributes"]["a"]["tvd"] == pytest.approx(0.0)


def test_shrink_groups_leaves_singletons_and_pulls_noise_to_the_mean():
    noisy = np.array([500.0, 3.0, -4.0, 6.0, 1.0, 800.0])
    vmap = np.array([0, 2, 2, 2, 2, 1])  # values 1-4 merged into code 2
    out = shrink_groups(noisy, vmap, sigma=10.0)
    assert out[0] == 500.0 and out[5] == 800.0
    group = noisy[1:5]
    assert out[1:5] == pytest.approx(np.full(4, group.mean()))  # spread far below k sigma^2: all to the mean
    assert out[1:5].sum() == pytest.approx(group.sum())  # the group's total is kept


def test_shrink_groups_keeps_a_real_spread():
    noisy = np.array([1000.0, 0.0, 500.0, 20.0])
    vmap = np.array([0, 0, 0, 0])
    out = shrink_groups(noisy, vmap, sigma=1.0)
    spread = np.sum((noisy - noisy.mean()) ** 2)
    factor = 1.0 - 1.0 / spread
    assert out == pytest.approx(noisy.mean() + factor * (noisy - noisy.mean()))


def test_shrink_reduces_error_on_average():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 40, size=30).astype(float)
    vmap = np.zeros(30, dtype=np.int64)
    raw_err, shrunk_err = [], []
    for _ in range(200):
        noisy = truth + rng.normal(0, 30.0, size=30)
        raw_err.append(np.abs(np.maximum(noisy, 0) - truth).sum())
        shrunk_err.append(np.abs(np.maximum(shrink_groups(noisy, vmap, 30.0), 0) - truth).sum())
    assert np.mean(shrunk_err) < 0.6 * np.mean(raw_err)


def test_one_way_fit_uses_each_attributes_own_sigma():
    domain = Domain.from_dict({"a": 3, "b": 2})
    tables = {("a", "b"): np.outer([20.0, 30.0, 50.0], [0.5, 0.5])}
    marginals = [NoisyMarginal(("a",), np.array([30.0, 30.0, 40.0]), 2.0, 0.1),   # per-attribute 1-way sigmas
                 NoisyMarginal(("b",), np.array([50.0, 50.0]), 5.0, 0.02),
                 NoisyMarginal(("a", "b"), np.full((3, 2), 16.0), 9.0, 0.01)]  # a pair's sigma is not a 1-way's
    fit = one_way_fit(tables, marginals, domain, 100.0)
    per_cell = math.sqrt(2 / math.pi) / 200.0
    assert fit["attributes"]["a"]["noise_tvd"] == pytest.approx(3 * 2.0 * per_cell)
    assert fit["attributes"]["b"]["noise_tvd"] == pytest.approx(2 * 5.0 * per_cell)
