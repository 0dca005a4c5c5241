"""The draw of a degree inside its bin from the noisy histogram (and the module's examples)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from privsyn_spark.privacy import people
from privsyn_spark.privacy.people import degrees_in_bins, within_bin_steps


def test_the_module_examples_run():
    result = doctest.testmod(people)
    assert result.attempted > 0 and result.failed == 0


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
