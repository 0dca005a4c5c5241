"""Noisy release of the InDif dependency scores of all attribute pairs (PrivSyn Section 4.1, Theorem 5).

How the privacy bound is kept with integer noise
------------------------------------------------
PrivSyn Lemma 4: adding or removing one record changes each InDif score by at most 4. Theorem 5 then
publishes all m = d(d-1)/2 scores with N(0, 8m/rho'), i.e. L2 sensitivity 4*sqrt(m) and
sigma = 4*sqrt(m / (2 rho')).

We only use the secure *integer* sampler, so we release round(k * InDif) + N_Z(0, sigma_k^2) and
divide by k afterwards (post-processing). Scaling by k multiplies the per-pair sensitivity by k, and
rounding moves each scaled score by at most 1/2, so for neighbours x, x'
    |round(k InDif(x)) - round(k InDif(x'))| <= k |InDif(x) - InDif(x')| + 1 <= 4k + 1  per pair,
hence an L2 sensitivity of at most (4k + 1) sqrt(m) for the integer vector. The discrete Gaussian
with sigma_k = (4k + 1) sqrt(m / (2 rho')) then gives rho'-zCDP (CKS20 multivariate discrete
Gaussian: Delta^2 / (2 sigma^2)). On the InDif scale the noise is sigma_k / k = (4 + 1/k) sqrt(m/(2 rho')),
Theorem 5's sqrt(8m/rho') widened by a factor (1 + 1/(4k)) -- 0.25 % at k = 100.

A person of up to K rows (``privacy/unit.py``) moves each score by at most 4K (Lemma 4 per row, the
triangle inequality over the K rows), so a scaled, rounded score by at most 4Kk + 1 <= K (4k + 1):
the sensitivity, and so sigma, is K times the row-level one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np

from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma
from privsyn_spark.privacy.noise import NoiseSampler, sampled_sigma, sampler_name

logger = logging.getLogger(__name__)

#: PrivSyn Lemma 4: L1-distance InDif changes by at most 4 when one record is added or removed.
INDIF_SENSITIVITY = 4.0


def indif_sensitivity(num_pairs: int, scale: int = 100, bound: int = 1) -> float:
    """L2 sensitivity of the scaled, rounded scores of ``num_pairs`` pairs: K (4k + 1) sqrt(m) (module docstring)."""
    return bound * ((INDIF_SENSITIVITY * scale + 1) * math.sqrt(num_pairs))


def indif_noise_scale(num_pairs: int, rho: float, scale: int = 100, bound: int = 1) -> float:
    """Standard deviation of the released InDif noise, on the InDif (count) scale."""
    return gaussian_sigma(indif_sensitivity(num_pairs, scale, bound), rho) / scale


def release_noisy_indif(scores: Mapping[tuple[str, ...], float], pairs: Sequence[tuple[str, ...]], rho: float, *,
                        accountant: Accountant, sampler: NoiseSampler, scale: int = 100,
                        name: str = "indif", bound: int = 1, **details: object) -> dict[tuple[str, ...], float]:
    """Publish InDif for every pair in ``pairs`` with rho-zCDP (PrivSyn Theorem 5, integer version above).

    ``scores`` holds the exact InDif (count scale) keyed by the same tuples as ``pairs``; all of the
    d(d-1)/2 pairs must be released together (the sensitivity accounts for all of them at once).
    ``bound``: K, the rows one privacy unit contributes at most; ``details`` go into the ledger entry.
    Returns the noisy scores (floats, multiples of 1/scale).
    """
    if not pairs:
        return {}
    scale = int(scale)
    if scale < 1:
        raise ValueError(f"release_noisy_indif: scale must be a positive integer, got {scale}")
    missing = [p for p in pairs if p not in scores]
    if missing:
        raise KeyError(f"release_noisy_indif: no exact InDif for pairs {missing[:5]} ...")
    m = len(pairs)
    exact = np.array([float(scores[p]) for p in pairs], dtype=np.float64)
    if not np.all(np.isfinite(exact)):
        raise ValueError("release_noisy_indif: exact InDif scores must be finite")
    scaled = np.rint(exact * scale).astype(np.int64)       # each moves by <= 1/2
    sensitivity = indif_sensitivity(m, scale, bound)  # K (4k + 1) sqrt(m), see module docstring
    requested = gaussian_sigma(sensitivity, rho)
    sigma = sampled_sigma(sampler, requested)  # the scale drawn (>= requested)
    accountant.register(name, rho, sensitivity=sensitivity, sigma=sigma, mechanism="discrete_gaussian",
                        cells=m, indif_scale=scale, sigma_indif=sigma / scale,
                        noise_source=sampler_name(sampler), sigma_requested=requested, **details)
    noise = np.asarray(sampler.discrete_gaussian(sigma, m))
    if noise.dtype != np.int64 or noise.shape != (m,):
        raise TypeError(f"sampler {type(sampler).__name__} returned {noise.dtype}{noise.shape}, expected int64 ({m},)")
    noisy = (scaled + noise) / scale
    logger.info("released %d noisy InDif scores (sigma %.4g on the count scale)", m, sigma / scale)
    return {p: float(v) for p, v in zip(pairs, noisy)}
