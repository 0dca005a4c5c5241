"""The noise: a goodness-of-fit test with power against the exact discrete Gaussian; integers only."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

from privsyn_spark.privacy.accounting import Accountant, BudgetExceededError
from privsyn_spark.privacy.noise import (NoiseSampler, SecureDiscreteGaussian, SeededSamplerForTestsOnly,
                                         gaussian_mechanism)

DRAWS = 100_000
NOT_REJECTED = 1e-20  # p-value bar from the issue: p > 1e-20 means "not rejected"


def discrete_gaussian_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf of N_Z(0, sigma^2), P(x) proportional to exp(-x^2 / (2 sigma^2)), on |x| <= 14 sigma + 2."""
    half = int(math.ceil(14 * sigma)) + 2
    x = np.arange(-half, half + 1)
    w = np.exp(-(x.astype(np.float64) ** 2) / (2 * sigma ** 2))
    return x, w / w.sum()


def chi_squared_p(draws: np.ndarray, sigma: float, bins: int = 50) -> float:
    """Chi-squared goodness of fit of integer ``draws`` against N_Z(0, sigma^2).

    Consecutive integers are grouped into bins of probability >= 1/bins (the tails join their
    neighbours), so every bin expects >= 2,000 of the 100,000 draws.
    """
    x, p = discrete_gaussian_pmf(sigma)
    edges, probs, acc = [x[0]], [], 0.0
    for xi, pi in zip(x, p):
        acc += pi
        if acc >= 1.0 / bins:
            edges.append(xi + 1)
            probs.append(acc)
            acc = 0.0
    probs[-1] += acc  # the right tail joins the last bin
    edges[-1] = x[-1] + 1
    edges = np.array(edges)
    idx = np.clip(np.searchsorted(edges, np.clip(draws, x[0], x[-1]), side="right") - 1, 0, len(probs) - 1)
    observed = np.bincount(idx, minlength=len(probs))
    expected = np.array(probs) * draws.size
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(chi2.sf(stat, len(probs) - 1))


class _OffScale:
    """A sampler whose scale is wrong by ``factor`` -- the test must catch it."""

    def __init__(self, inner: NoiseSampler, factor: float) -> None:
        self.inner, self.factor = inner, factor

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self.inner.discrete_gaussian(sigma * self.factor, size)


@pytest.fixture(scope="module")
def secure() -> SecureDiscreteGaussian:
    return SecureDiscreteGaussian()


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1000.0])
def test_secure_sampler_fits_exact_discrete_gaussian(secure, sigma):
    draws = secure.discrete_gaussian(sigma, DRAWS)
    assert draws.dtype == np.int64 and draws.shape == (DRAWS,)
    assert chi_squared_p(draws, sigma) > NOT_REJECTED


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1000.0])
def test_seeded_sampler_fits_exact_discrete_gaussian(sigma):
    draws = SeededSamplerForTestsOnly(seed=11).discrete_gaussian(sigma, DRAWS)
    assert draws.dtype == np.int64
    assert chi_squared_p(draws, sigma) > NOT_REJECTED


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1000.0])
@pytest.mark.parametrize("factor", [1.3, 0.7])
def test_goodness_of_fit_rejects_sampler_30_percent_off(secure, sigma, factor):
    inner = secure if factor == 1.3 else SeededSamplerForTestsOnly(seed=5)
    draws = _OffScale(inner, factor).discrete_gaussian(sigma, DRAWS)
    assert chi_squared_p(draws, sigma) < NOT_REJECTED


def test_samplers_reject_bad_arguments(secure):
    for sampler in (secure, SeededSamplerForTestsOnly(0)):
        assert isinstance(sampler, NoiseSampler)
        assert sampler.discrete_gaussian(2.0, 0).shape == (0,)
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError):
                sampler.discrete_gaussian(bad, 3)


def test_gaussian_mechanism_integers_only_and_large_counts(secure):
    acct = Accountant(1.0)
    big = np.array([[2 ** 40 + 3, 0], [2 ** 33, 7]], dtype=np.int64)  # above the i32 range of opendp's T=int
    noisy, sigma = gaussian_mechanism(big, 0.5, accountant=acct, sampler=secure, name="big")
    assert sigma == pytest.approx(1.0)  # sqrt(1 / (2 * 0.5))
    assert noisy.dtype == np.float64 and noisy.shape == big.shape
    assert np.all(noisy == np.round(noisy))
    assert np.all(np.abs(noisy - big) < 40)  # noise of scale 1 added exactly on top of 2^40
    with pytest.raises(TypeError):
        gaussian_mechanism(np.array([1.0, 2.0]), 0.1, accountant=acct, sampler=secure, name="floats")
    entry = acct.ledger[0]
    assert entry["name"] == "big" and entry["sensitivity"] == 1.0 and entry["rho"] == 0.5
    assert entry["noise_source"] == "SecureDiscreteGaussian"


def test_gaussian_mechanism_refuses_before_sampling():
    class Exploding:
        def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
            raise AssertionError("noise drawn for a refused release")

    acct = Accountant(0.1)
    with pytest.raises(BudgetExceededError):
        gaussian_mechanism(np.zeros(3, dtype=np.int64), 0.2, accountant=acct, sampler=Exploding(), name="too much")


def test_production_code_never_constructs_the_seeded_sampler():
    package = Path(__file__).resolve().parents[2] / "privsyn_spark"
    offenders = [str(p) for p in package.rglob("*.py")
                 if p.name != "noise.py" and "SeededSamplerForTestsOnly" in p.read_text()]
    assert offenders == []


def test_privacy_package_never_imports_pyspark_or_pandas():
    code = (
        "import importlib, pkgutil, sys\n"
        "import privsyn_spark.privacy as p\n"
        "for m in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module('privsyn_spark.privacy.' + m.name)\n"
        "from privsyn_spark.privacy.noise import SecureDiscreteGaussian\n"
        "SecureDiscreteGaussian().discrete_gaussian(1.0, 3)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('pyspark', 'pandas', 'py4j')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
