"""Shares of the original values inside a merged rare-value cell, for decoding (post-processing).

A merged cell holds the values whose noisy 1-way count fell below theta = 3 sigma, so each of those
counts is mostly noise: PrivSyn's decoding draws them in proportion to the raw noisy counts (negatives
as zero), which gives a value whose true count is 0 as much weight as the noise puts on it. Here the
noisy counts of a group of k >= 2 values are shrunk toward the group mean first, by the positive-part
James-Stein estimator (James & Stein 1961; Efron & Morris 1973):
y_i' = m + max(0, 1 - (k - 3)^+ sigma^2 / sum_j (y_j - m)^2) (y_i - m) with m the group mean (for
k <= 3 the factor uses 1 instead of k - 3, a stronger pull). It dominates the raw counts in squared error for
k >= 4, and leaves groups whose counts differ far more than the noise almost unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from privsyn_spark.privacy.measurements import Measurements


def shrink_groups(noisy: np.ndarray, value_map: np.ndarray, sigma: float) -> np.ndarray:
    """The noisy counts with every merged group (a value-map code held by >= 2 values) shrunk."""
    out = np.asarray(noisy, dtype=np.float64).copy()
    value_map = np.asarray(value_map, dtype=np.int64)
    sizes = np.bincount(value_map)
    for group in np.flatnonzero(sizes >= 2):
        idx = np.flatnonzero(value_map == group)
        y = out[idx]
        mean = float(y.mean())
        spread = float(np.sum((y - mean) ** 2))
        factor = max(0.0, 1.0 - max(idx.size - 3, 1) * sigma ** 2 / spread) if spread > 0 else 0.0
        out[idx] = mean + factor * (y - mean)
    return out


def expansion_weights(measurements: Measurements, shrink: bool = True) -> Mapping[str, np.ndarray]:
    """Weights decoding draws merged values with: the noisy original-domain 1-way counts, shrunk per
    merged group when ``shrink`` (else as released, PrivSyn's decoding)."""
    if not shrink:
        return measurements.one_way_original
    sigmas = measurements.one_way_sigmas()
    return {a: shrink_groups(counts, measurements.value_maps[a], sigmas[a]) if a in sigmas else counts
            for a, counts in measurements.one_way_original.items()}
