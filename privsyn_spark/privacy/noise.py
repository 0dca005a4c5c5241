"""Integer noise for the releases: the NoiseSampler protocol, the secure discrete Gaussian, the
Gaussian mechanism on count vectors.

Production noise is ``SecureDiscreteGaussian``: the exact discrete Gaussian of Canonne-Kamath-Steinke
2020 (Algorithms 1-3) vectorised on int64 (:mod:`~privsyn_spark.privacy.discrete_gaussian`), with
every random bit from ``os.urandom`` (the operating system's cryptographically secure source). It
samples sigma rounded *up* to a rational with small terms (at most 1e-5 relative, ``sigma_used``);
the releases are charged the rho of the requested sigma and record the sigma sampled. Scales the
int64 path cannot hold (sigma above ~8e7 or below ~0.03) go to OpenDP's exact sampler
(``OpenDPDiscreteGaussian``, also the reference in the tests). ``SeededSamplerForTestsOnly`` exists
for reproducible tests and benchmarks; production code never constructs it (a test checks this).
``seeded_noise_for_tests_only(seed)`` is the privacy audit's hook (``tests/audit``, docs/privacy-audit.md):
inside that block every ``SecureDiscreteGaussian`` draws from a seeded stream instead, so that two
runs on neighbouring tables get the same noise. It is an in-process switch only (no environment
variable, setting or flag reaches it; production code never calls it, a test checks this), and the
ledger then names the noise source ``SeededSamplerForTestsOnly``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma
from privsyn_spark.privacy.discrete_gaussian import RationalScale, UniformIntegers, discrete_gaussian

logger = logging.getLogger(__name__)

# OpenDP adds in i64 with saturation. The noise itself stays far below 2^62 as long as sigma is below
# this bound (a discrete Gaussian exceeds 40 sigma with probability < 1e-340).
MAX_SIGMA = 2.0 ** 62 / 40.0


@runtime_checkable
class NoiseSampler(Protocol):
    """Source of privacy noise: i.i.d. discrete Gaussian N_Z(0, sigma^2) draws as an int64 array.

    A sampler that draws at a scale slightly above the requested one also has
    ``sigma_used(sigma) -> float`` (see :func:`sampled_sigma`).
    """

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """``size`` independent draws from the discrete Gaussian with scale ``sigma`` (int64)."""
        ...


def sampled_sigma(sampler: NoiseSampler, sigma: float) -> float:
    """The scale ``sampler`` actually draws at when asked for ``sigma`` (>= sigma; sigma itself by default)."""
    used = getattr(sampler, "sigma_used", None)
    used = float(sigma) if used is None else float(used(sigma))
    if not used >= sigma:
        raise RuntimeError(f"sampler {type(sampler).__name__} would draw at sigma={used} < requested {sigma}")
    return used


def sampler_name(sampler: NoiseSampler) -> str:
    """The noise source recorded in the ledger: a wrapper's ``source`` (the sampler it wraps), else the class."""
    return getattr(sampler, "source", None) or type(sampler).__name__


def _check_args(sigma: float, size: int) -> tuple[float, int]:
    sigma = float(sigma)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"discrete_gaussian: sigma must be a positive finite number, got {sigma}")
    if sigma > MAX_SIGMA:
        raise ValueError(f"discrete_gaussian: sigma={sigma:.3g} is above {MAX_SIGMA:.3g}; int64 noise could saturate")
    size = int(size)
    if size < 0:
        raise ValueError(f"discrete_gaussian: size must be >= 0, got {size}")
    return sigma, size


class SecureDiscreteGaussian:
    """Production sampler: exact discrete Gaussian (CKS20 Algorithms 1-3, vectorised) from ``os.urandom``.

    ``sigma_used(sigma)`` is the scale drawn: sigma rounded up so that sigma^2 is a rational with small
    terms (:class:`~privsyn_spark.privacy.discrete_gaussian.RationalScale`). Scales outside the int64
    path go to :class:`OpenDPDiscreteGaussian` at the requested sigma. About 1-2 million values/s
    on one core (``bench/bench_noise.py``).
    """

    def __init__(self) -> None:
        self._ints = UniformIntegers(os.urandom)
        self._fallback: OpenDPDiscreteGaussian | None = None

    @property
    def source(self) -> str:
        """The noise source the ledger records: this class, or the test-only seeded stream while it is on."""
        return "SecureDiscreteGaussian" if _TEST_ONLY_STREAM is None else "SeededSamplerForTestsOnly"

    def sigma_used(self, sigma: float) -> float:
        """The scale actually sampled for a request of ``sigma`` (>= sigma, within 1e-5 relative)."""
        sigma, _ = _check_args(sigma, 0)
        scale = RationalScale.for_sigma(sigma)
        return sigma if scale is None else max(sigma, scale.sigma)

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """``size`` draws of N_Z(0, sigma_used(sigma)^2), as int64."""
        sigma, size = _check_args(sigma, size)
        if _TEST_ONLY_STREAM is not None:
            return _TEST_ONLY_STREAM.discrete_gaussian(sigma, size)
        scale = RationalScale.for_sigma(sigma)
        if scale is not None:
            return discrete_gaussian(self._ints, scale, size)
        if self._fallback is None:
            self._fallback = OpenDPDiscreteGaussian()
        return self._fallback.discrete_gaussian(sigma, size)


class OpenDPDiscreteGaussian:
    """OpenDP's exact discrete Gaussian (``make_gaussian`` on i64 vectors, OpenDP's secure source).

    OpenDP is fed zero vectors, so it only produces the noise; callers add the counts in int64
    themselves, which keeps counts above 2^31 exact (OpenDP's ``T=int`` is i32 and saturates there).
    Roughly 12-50 microseconds per value, single-threaded: the fallback of ``SecureDiscreteGaussian``
    and the reference in the tests and in ``bench/bench_noise.py``.
    """

    def __init__(self, chunk_size: int = 1_000_000) -> None:
        # Import the OpenDP submodules only (opendp.prelude also imports pandas).
        from opendp import domains, measurements, metrics
        from opendp.mod import enable_features

        enable_features("contrib")
        self._domains, self._measurements, self._metrics = domains, measurements, metrics
        self._chunk_size = int(chunk_size)
        self._cache: dict[float, object] = {}

    def _measurement(self, sigma: float) -> Any:
        meas = self._cache.get(sigma)
        if meas is None:
            d, m, me = self._domains, self._measurements, self._metrics
            meas = m.make_gaussian(d.vector_domain(d.atom_domain(T="i64")), me.l2_distance(T="i64"), scale=sigma)
            # Guard the meaning of ``scale``: OpenDP's own privacy map must give rho = 1 / (2 sigma^2).
            claimed = float(meas.map(1))
            if abs(claimed - 1.0 / (2.0 * sigma * sigma)) > 1e-6 * claimed:
                raise RuntimeError(f"OpenDP make_gaussian(scale={sigma}) maps sensitivity 1 to rho={claimed}, "
                                   f"expected {1.0 / (2.0 * sigma * sigma)}")
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[sigma] = meas
        return meas

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """``size`` draws of N_Z(0, sigma^2) from OpenDP's secure sampler, as int64."""
        sigma, size = _check_args(sigma, size)
        out = np.empty(size, dtype=np.int64)
        meas = self._measurement(sigma)
        for start in range(0, size, self._chunk_size):
            n = min(self._chunk_size, size - start)
            out[start:start + n] = np.asarray(meas(np.zeros(n, dtype=np.int64)), dtype=np.int64)
        return out


class SeededSamplerForTestsOnly:
    """TEST-ONLY reproducible discrete Gaussian (numpy Generator; NOT a secure random source).

    Exact-in-distribution rejection sampler from a discrete Laplace proposal (Canonne-Kamath-Steinke
    2020, Algorithm 3) evaluated in floating point. Never use it for a real release.
    """

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        logger.warning("SeededSamplerForTestsOnly in use: noise is reproducible and NOT private")

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """``size`` draws of N_Z(0, sigma^2) from a seeded numpy generator, as int64."""
        sigma, size = _check_args(sigma, size)
        rng = self._rng
        t = math.floor(sigma) + 1.0
        p = -math.expm1(-1.0 / t)  # discrete Laplace(t) = difference of two Geometric(1 - e^{-1/t})
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            n = max(64, int(1.6 * (size - filled)))
            y = (rng.geometric(p, n) - rng.geometric(p, n)).astype(np.int64)
            accept = rng.random(n) < np.exp(-((np.abs(y) - sigma ** 2 / t) ** 2) / (2.0 * sigma ** 2))
            y = y[accept][: size - filled]
            out[filled:filled + y.size] = y
            filled += y.size
        return out


_TEST_ONLY_STREAM: SeededSamplerForTestsOnly | None = None
"""The seeded stream every SecureDiscreteGaussian draws from inside :func:`seeded_noise_for_tests_only`."""


@contextmanager
def seeded_noise_for_tests_only(seed: int) -> Iterator[None]:
    """TEST-ONLY (NOT private): inside the block every :class:`SecureDiscreteGaussian` draws from one
    ``SeededSamplerForTestsOnly(seed)`` stream, so two runs on neighbouring tables draw the same noise
    (the privacy audit's release diff). In-process only; not reentrant."""
    global _TEST_ONLY_STREAM
    if _TEST_ONLY_STREAM is not None:
        raise RuntimeError("seeded_noise_for_tests_only is already on")
    _TEST_ONLY_STREAM = SeededSamplerForTestsOnly(seed)
    try:
        yield
    finally:
        _TEST_ONLY_STREAM = None


def gaussian_mechanism(counts: np.ndarray, rho: float, *, accountant: Accountant, sampler: NoiseSampler,
                       name: str, sensitivity: float = 1.0, **details: object) -> tuple[np.ndarray, float]:
    """Release an integer count table with discrete Gaussian noise of L2 ``sensitivity`` (1: one row).

    A record adds 1 to exactly one cell, so sigma = Delta sqrt(1 / (2 rho)) gives rho-zCDP (PrivSyn
    Theorem 6; CKS20 for the discrete Gaussian); a person of K rows has Delta = K
    (``privacy/unit.count_sensitivity``). Registers with ``accountant`` before sampling (``details``
    go into the ledger entry).
    The sampler may draw at a slightly larger scale (``sampled_sigma``); the ledger records both.
    Returns (noisy counts as float64 holding integers, same shape; the sigma drawn).
    """
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        raise TypeError(f"gaussian_mechanism({name!r}): counts must be integers, got dtype {counts.dtype}")
    sigma = gaussian_sigma(sensitivity, rho)
    used = sampled_sigma(sampler, sigma)  # >= sigma: charged rho as before, the sigma drawn recorded
    accountant.register(name, rho, sensitivity=sensitivity, sigma=used, mechanism="discrete_gaussian",
                        cells=int(counts.size), noise_source=sampler_name(sampler), sigma_requested=sigma,
                        **details)
    noise = np.asarray(sampler.discrete_gaussian(sigma, counts.size))
    if noise.dtype != np.int64 or noise.shape != (counts.size,):
        raise TypeError(f"sampler {type(sampler).__name__} returned {noise.dtype}{noise.shape}, "
                        f"expected int64 ({counts.size},)")
    noisy = counts.astype(np.int64).reshape(-1) + noise  # exact int64 addition (counts may exceed 2^31)
    return noisy.astype(np.float64).reshape(counts.shape), used
