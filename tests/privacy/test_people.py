"""The degree bins (public, a function of M) and the draw of a degree inside its bin from the noisy histogram."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.privacy.people import degree_bins, degrees_in_bins, within_bin_steps


def test_degree_bins_are_geometric_cover_one_to_m_and_stop_at_m():
    assert degree_bins(1) == [(1, 1)]
    assert degree_bins(4) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert degree_bins(5) == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert degree_bins(50)[4:] == [(5, 6), (7, 8), (9, 12), (13, 16), (17, 24), (25, 32), (33, 48), (49, 50)]
    for m in range(1, 300):
        bins = degree_bins(m)
        cover = [d for low, high in bins for d in range(low, high + 1)]
        assert cover == list(range(1, m + 1))
        assert all(high - low + 1 <= max(1, (low - 1) // 2) for low, high in bins)  # width at most half its start
    assert len(degree_bins(10_000)) == 4 + 2 * 11 + 1  # 1..4, two per doubling up to 8192, then 8193-10000
    with pytest.raises(ValueError, match="at least 1"):
        degree_bins(0)


def test_within_bin_shares_are_the_clipped_normalised_histogram_and_uniform_when_empty():
    hist = np.array([5.0, -2, 7, 1, -3, -1, 2, 6, 10, -5, 30, 0])  # bins 1,2,3,4,5-6,7-8,9-12
    # bin index + the within-bin CDF: 5-6 has no mass (uniform), 7-8 is 2:6, 9-12 is 10:0:30:0
    assert np.allclose(within_bin_steps(hist), [1, 2, 3, 4, 4.5, 5, 5.25, 6, 6.25, 6.25, 7, 7])
    codes = np.repeat(np.arange(7), 4)
    uniforms = np.tile([0.0, 0.3, 0.6, 0.999], 7)
    got = degrees_in_bins(codes, uniforms, hist).reshape(7, 4)
    assert got.tolist() == [[1] * 4, [2] * 4, [3] * 4, [4] * 4, [5, 5, 6, 6], [7, 8, 8, 8], [9, 11, 11, 11]]
    with pytest.raises(ValueError, match="outside 0..6"):
        degrees_in_bins(np.array([7]), np.array([0.5]), hist)
