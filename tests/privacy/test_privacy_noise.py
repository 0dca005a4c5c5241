"""The noise: goodness-of-fit tests with power against the exact discrete Gaussian; integers only.

The production sampler (vectorised CKS20 on os.urandom) is checked against the exact pmf at small and
large sigma with 10^6 draws: a chi-squared test (p > 1e-20) and a scale test (the mean of x^2 within
6 standard errors of the exact second moment). Both reject a sampler whose sigma is 2 % off (there the
scale z is about 28 and the chi-squared p below 1e-120). OpenDP's sampler stays as the reference.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

from privsyn_spark.privacy.accounting import Accountant, BudgetExceededError, gaussian_rho
from privsyn_spark.privacy.discrete_gaussian import (
    INT_LIMIT,
    MAX_INFLATION,
    TAIL_SCALES,
    RationalScale,
    UniformIntegers,
    _accept,
    _bernoulli_exp_exact,
    bernoulli_exp,
    bernoulli_exp_minus_one,
    discrete_gaussian,
)
from privsyn_spark.privacy.noise import (
    NoiseSampler,
    OpenDPDiscreteGaussian,
    SecureDiscreteGaussian,
    SeededSamplerForTestsOnly,
    gaussian_mechanism,
    sampled_sigma,
)

DRAWS = 1_000_000          # production sampler: enough for a 2 % scale error to fail by a wide margin
REFERENCE_DRAWS = 100_000  # OpenDP (~20-80k values/s) and the float seeded sampler
NOT_REJECTED = 1e-20       # chi-squared: p > 1e-20 means "not rejected"
SCALE_Z = 6.0              # scale test: |z| <= 6 (a correct sampler fails w.p. 2e-9)
SIGMAS = [0.5, 1.0, 3.0, 1000.0, 100_000.0]


def discrete_gaussian_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf of N_Z(0, sigma^2), P(x) proportional to exp(-x^2 / (2 sigma^2)), on |x| <= 14 sigma + 2."""
    half = int(math.ceil(14 * sigma)) + 2
    x = np.arange(-half, half + 1)
    w = np.exp(-(x.astype(np.float64) ** 2) / (2 * sigma ** 2))
    return x, w / w.sum()


def chi_squared_p(draws: np.ndarray, sigma: float, bins: int = 50) -> float:
    """Chi-squared goodness of fit of integer ``draws`` against N_Z(0, sigma^2).

    Consecutive integers are grouped into bins of probability >= 1/bins (the tails join their
    neighbours), so every bin expects >= draws/bins values.
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


def scale_z(draws: np.ndarray, sigma: float) -> float:
    """z-score of the mean of x^2 against the exact second moment of N_Z(0, sigma^2) (exact 4th moment: its error)."""
    x, p = discrete_gaussian_pmf(sigma)
    x = x.astype(np.float64)
    m2, m4 = float((x ** 2 * p).sum()), float((x ** 4 * p).sum())
    sq = draws.astype(np.float64) ** 2
    return (float(sq.mean()) - m2) / math.sqrt((m4 - m2 ** 2) / draws.size)


def fits(draws: np.ndarray, sigma: float) -> bool:
    """The check every sampler must pass: chi-squared not rejected and the scale within SCALE_Z."""
    return chi_squared_p(draws, sigma) > NOT_REJECTED and abs(scale_z(draws, sigma)) <= SCALE_Z


class _OffScale:
    """A sampler whose scale is wrong by ``factor`` -- the test must catch it."""

    def __init__(self, inner: NoiseSampler, factor: float) -> None:
        self.inner, self.factor = inner, factor

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self.inner.discrete_gaussian(sigma * self.factor, size)


@pytest.fixture(scope="module")
def secure() -> SecureDiscreteGaussian:
    return SecureDiscreteGaussian()


@pytest.fixture(scope="module")
def opendp() -> OpenDPDiscreteGaussian:
    return OpenDPDiscreteGaussian()


def seeded_integers(seed: int) -> UniformIntegers:
    """The vectorised algorithms on a reproducible byte source (tests only: never a release)."""
    return UniformIntegers(np.random.default_rng(seed).bytes)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_secure_sampler_fits_exact_discrete_gaussian(secure, sigma):
    draws = secure.discrete_gaussian(sigma, DRAWS)
    assert draws.dtype == np.int64 and draws.shape == (DRAWS,)
    assert chi_squared_p(draws, sigma) > NOT_REJECTED
    assert abs(scale_z(draws, sigma)) <= SCALE_Z


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("factor", [1.02, 0.98])
def test_checks_reject_a_sampler_two_percent_off(secure, sigma, factor):
    draws = _OffScale(secure, factor).discrete_gaussian(sigma, DRAWS)
    assert abs(scale_z(draws, sigma)) > SCALE_Z
    assert chi_squared_p(draws, sigma) < NOT_REJECTED
    assert not fits(draws, sigma)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1000.0])
def test_opendp_reference_fits_exact_discrete_gaussian(opendp, sigma):
    draws = opendp.discrete_gaussian(sigma, REFERENCE_DRAWS)
    assert draws.dtype == np.int64 and draws.shape == (REFERENCE_DRAWS,)
    assert fits(draws, sigma)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1000.0])
def test_seeded_sampler_fits_exact_discrete_gaussian(sigma):
    draws = SeededSamplerForTestsOnly(seed=11).discrete_gaussian(sigma, REFERENCE_DRAWS)
    assert draws.dtype == np.int64
    assert fits(draws, sigma)


@pytest.mark.parametrize("sigma", [0.7, 2.5, 40.0])
def test_vectorised_algorithm_fits_on_a_reproducible_source(sigma):
    # same code as the production sampler, deterministic bytes: this check cannot flake
    scale = RationalScale.for_sigma(sigma)
    draws = discrete_gaussian(seeded_integers(3), scale, DRAWS)
    assert fits(draws, scale.sigma)
    assert not fits(discrete_gaussian(seeded_integers(4), RationalScale.for_sigma(sigma * 1.02), DRAWS), scale.sigma)


@pytest.mark.parametrize("sigma", [1e-9, 1e-3, 3e8, 1e12])
def test_scales_outside_the_int64_path_go_to_opendp_at_the_requested_sigma(sigma):
    sampler = SecureDiscreteGaussian()
    assert RationalScale.for_sigma(sigma) is None
    assert sampler.sigma_used(sigma) == sigma
    draws = sampler.discrete_gaussian(sigma, 20_000)
    assert isinstance(sampler._fallback, OpenDPDiscreteGaussian)
    if sigma < 0.1:  # P(x != 0) <= 2 exp(-1 / (2 sigma^2)) < 1e-200
        assert np.all(draws == 0)
    else:  # far beyond any lattice effect: the second moment is sigma^2 (relative error sqrt(2/n))
        ratio = float(np.mean(draws.astype(np.float64) ** 2)) / sigma ** 2
        assert abs(ratio - 1) <= SCALE_Z * math.sqrt(2 / draws.size)


def test_rational_scale_rounds_sigma_up_within_bounds():
    for sigma in np.concatenate([np.geomspace(0.03, 8e7, 400), [0.5, 1.0, 2.0, 3.0, 1000.0, 1e5]]):
        scale = RationalScale.for_sigma(float(sigma))
        assert scale is not None, sigma
        exact = scale.sigma_squared
        assert exact >= float(sigma) ** 2 and float(exact) <= (float(sigma) * (1 + MAX_INFLATION)) ** 2
        assert scale.t == math.floor(sigma) + 1
        assert scale.d * TAIL_SCALES * scale.t + scale.m < INT_LIMIT and scale.den < 2 ** 62
    assert RationalScale.for_sigma(1.0).sigma_squared == 1  # exact where possible


def test_uniform_integers_are_uniform():
    ints = seeded_integers(7)
    for bound in (2, 3, 5, 1000, 2 ** 33 + 1, 2 ** 62):
        draws = ints.below(bound, 200_000)
        assert draws.min() >= 0 and draws.max() < bound
        k = min(bound, 20)  # k buckets of (almost exactly) equal probability
        buckets = np.bincount(np.minimum((draws.astype(np.float64) / bound * k).astype(int), k - 1), minlength=k)
        expected = np.full(k, 200_000 / k)
        assert chi2.sf(((buckets - expected) ** 2 / expected).sum(), k - 1) > 1e-9
    coins = ints.coins(100_001)
    assert coins.shape == (100_001,) and abs(coins.mean() - 0.5) < 6 * 0.5 / math.sqrt(100_001)
    with pytest.raises(ValueError):
        ints.below(2 ** 62 + 1, 3)


@pytest.mark.parametrize("num,den", [(0, 7), (3, 10), (1, 1), (5, 2), (7, 3), (41, 4)])
def test_bernoulli_exp_matches_exp_minus_gamma(num, den):
    n, p = 400_000, math.exp(-num / den)
    hits = bernoulli_exp(seeded_integers(num * 100 + den), np.full(n, num, dtype=np.int64), den)
    assert abs(hits.mean() - p) <= 6 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_bernoulli_exp_minus_one_continues_exactly_past_twelve():
    # the first uniform of every draw is 0: all passed K = 2..12 at once, the rest is drawn one by one
    n, rng = 20_000, np.random.default_rng(8)
    stream = [bytes(4 * n)]
    hits = bernoulli_exp_minus_one(UniformIntegers(lambda k: stream.pop() if stream else rng.bytes(k)), n)
    f = math.factorial
    p = sum(f(12) * (1 / f(k - 1) - 1 / f(k)) for k in range(13, 41, 2))  # P(K odd | K > 12)
    assert abs(hits.mean() - p) <= 6 * math.sqrt(p * (1 - p) / n)


def test_exact_python_int_path_for_far_tails():
    ints = seeded_integers(5)
    n, num, den = 20_000, 7, 3
    hits = np.array([_bernoulli_exp_exact(ints, num, den) for _ in range(n)])
    p = math.exp(-num / den)
    assert abs(hits.mean() - p) <= 6 * math.sqrt(p * (1 - p) / n)
    assert _bernoulli_exp_exact(ints, 2 ** 200, 3) is False  # any size, no overflow
    scale = RationalScale.for_sigma(3.0)
    far = np.array([0, 2 ** 40, -(2 ** 50)], dtype=np.int64)  # beyond the int64 path
    assert list(_accept(ints, scale, far)[1:]) == [False, False]


def test_samplers_reject_bad_arguments(secure, opendp):
    for sampler in (secure, opendp, SeededSamplerForTestsOnly(0)):
        assert isinstance(sampler, NoiseSampler)
        assert sampler.discrete_gaussian(2.0, 0).shape == (0,)
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError):
                sampler.discrete_gaussian(bad, 3)


def test_secure_sampler_reads_the_operating_system_source(secure):
    assert secure._ints._bytes is os.urandom


def test_gaussian_mechanism_integers_only_and_large_counts(secure):
    acct = Accountant(1.0)
    big = np.array([[2 ** 40 + 3, 0], [2 ** 33, 7]], dtype=np.int64)  # above the i32 range of opendp's T=int
    noisy, sigma = gaussian_mechanism(big, 0.5, accountant=acct, sampler=secure, name="big")
    assert sigma == 1.0  # sqrt(1 / (2 * 0.5)), exactly representable
    assert noisy.dtype == np.float64 and noisy.shape == big.shape
    assert np.all(noisy == np.round(noisy))
    assert np.all(np.abs(noisy - big) < 40)  # noise of scale 1 added exactly on top of 2^40
    with pytest.raises(TypeError):
        gaussian_mechanism(np.array([1.0, 2.0]), 0.1, accountant=acct, sampler=secure, name="floats")
    entry = acct.ledger[0]
    assert entry["name"] == "big" and entry["sensitivity"] == 1.0 and entry["rho"] == 0.5
    assert entry["noise_source"] == "SecureDiscreteGaussian"


def test_gaussian_mechanism_charges_the_requested_rho_and_records_the_sigma_drawn(secure):
    acct = Accountant(1.0)
    rho = 0.0123
    _, sigma = gaussian_mechanism(np.zeros(5, dtype=np.int64), rho, accountant=acct, sampler=secure, name="m")
    entry = acct.ledger[0]
    requested = math.sqrt(1 / (2 * rho))
    assert entry["rho"] == rho and acct.spent == rho  # charged as before
    assert entry["sigma_requested"] == requested
    assert entry["sigma"] == sigma == secure.sigma_used(requested)
    assert requested < sigma <= requested * (1 + MAX_INFLATION)  # rounded up, never down
    assert gaussian_rho(1.0, sigma) <= rho
    assert sampled_sigma(SeededSamplerForTestsOnly(0), requested) == requested

    class Shrinking:
        def sigma_used(self, s):
            return s * 0.99

        def discrete_gaussian(self, s, size):
            raise AssertionError("noise drawn below the charged scale")

    with pytest.raises(RuntimeError):
        gaussian_mechanism(np.zeros(2, dtype=np.int64), 0.1, accountant=acct, sampler=Shrinking(), name="x")


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
