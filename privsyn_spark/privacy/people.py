"""A person's degree (rows per person, capped at the public M): its bins and the draw inside a bin.

The bins are public (a function of M only): 1, 2, 3, 4, then two bins per doubling, 5-6, 7-8, 9-12,
13-16, 17-24, 25-32, ..., the last one cut at M. The person model measures a person's bin (the
``_degree`` attribute, the 0-based index into :func:`degree_bins`); the noisy degree histogram over
1..M says where inside its bin a synthetic person's degree falls. Both reads of the histogram here
are post-processing of the noisy vector: its cells are clipped at 0 and normalised within each bin,
and a bin whose clipped mass is 0 is drawn uniformly.

>>> degree_bins(30)
[(1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (7, 8), (9, 12), (13, 16), (17, 24), (25, 30)]
>>> degrees_in_bins(np.array([4, 6]), np.array([0.5, 0.1]), np.array([1., 1, 1, 1, 0, 3, 1, 0, 0, 0, 0, 0]))
array([6, 9])
"""

from __future__ import annotations

import numpy as np


def degree_bins(max_rows: int) -> list[tuple[int, int]]:
    """The degree bins ``(low, high)`` (inclusive) over 1..``max_rows``: geometric, two per doubling after 4."""
    if int(max_rows) < 1:
        raise ValueError(f"the cap on rows per person must be at least 1, got {max_rows}")
    bins, low = [], 1
    while low <= max_rows:
        width = 1 if low <= 4 else 1 << (((low - 1) // 2).bit_length() - 1)
        bins.append((low, min(low + width - 1, int(max_rows))))
        low += width
    return bins


def within_bin_steps(noisy_hist: np.ndarray) -> np.ndarray:
    """``bin + P(degree <= d | its bin)`` for every degree d = 1..M (M = ``len(noisy_hist)``): one increasing
    array over all bins, so a searchsorted finds a degree inside its bin (:func:`degrees_in_bins`)."""
    mass = np.clip(np.asarray(noisy_hist, dtype=np.float64), 0.0, None)
    steps = np.empty(mass.size)
    for index, (low, high) in enumerate(degree_bins(mass.size)):
        cell = mass[low - 1:high]
        shares = cell / cell.sum() if cell.sum() > 0 else np.full(cell.size, 1.0 / cell.size)
        cdf = np.cumsum(shares)
        cdf[-1] = 1.0
        steps[low - 1:high] = index + cdf
    return steps


def degrees_in_bins(bin_codes: np.ndarray, uniforms: np.ndarray, noisy_hist: np.ndarray) -> np.ndarray:
    """The degree of each person in bin ``bin_codes`` drawn with its uniform in [0, 1) from the bin's
    share of the noisy histogram (inverse CDF within the bin)."""
    steps = within_bin_steps(noisy_hist)
    codes = np.asarray(bin_codes, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= len(degree_bins(steps.size))):
        raise ValueError(f"a degree bin code outside 0..{len(degree_bins(steps.size)) - 1}")
    return np.searchsorted(steps, codes + np.asarray(uniforms, dtype=np.float64), side="right") + 1
