"""Direct tests of the sampler's uniform integer generator: exact uniformity at awkward
bounds (12!, 2^k +- 1, 3 * 2^30, wide bounds above 2^32), with the power to catch a modulo bias.

A modulo-biased ``below`` (``word % bound``) gives the values under ``2^w mod bound`` (w the word width)
one extra chance each; the sampler's other tests do not notice it. Each test here measures exactly that
region, and :func:`test_the_tests_catch_a_modulo_biased_generator` shows they reject such a generator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from privsyn_spark.privacy.discrete_gaussian import UniformIntegers

DRAWS = 2_000_000
Z_LIMIT = 5.0        # |z| of the region's share, unbiased: P(fail) ~ 6e-7
P_LIMIT = 1e-6       # chi-squared p-value below which uniformity is rejected
AWKWARD = [math.factorial(12), 2 ** 31 + 1, 2 ** 31 - 1, 3 * 2 ** 30, 2 ** 33 // 3, 2 ** 32 - 1, 2 ** 32 + 1,
           2 ** 33 + 1, 3 * 2 ** 60, 2 ** 62]


class ModuloBiased(UniformIntegers):
    """The bug R5 is about: a word modulo the bound (no rejection)."""

    def below(self, bound: int, n: int) -> np.ndarray:
        wide = bound > 2 ** 32
        return (self._words(n, wide) % np.uint64(bound)).astype(np.int64)


def _source(seed: int) -> UniformIntegers:
    return UniformIntegers(np.random.default_rng(seed).bytes)


def modulo_region(bound: int) -> int:
    """The values a modulo-biased generator over-weights: ``[0, 2^w mod bound)``."""
    return (2 ** (64 if bound > 2 ** 32 else 32)) % bound


def region_z(ints: UniformIntegers, bound: int, draws: int = DRAWS) -> float:
    """z score of the share of draws in the modulo region (or, when it is empty, the lowest ``bound // 3``
    values) against its exact uniform probability."""
    region = modulo_region(bound) or bound // 3
    p = region / bound
    x = ints.below(bound, draws)
    assert x.dtype == np.int64 and x.min() >= 0 and x.max() < bound
    share = float(np.mean(x < region))
    return (share - p) / math.sqrt(p * (1 - p) / draws)


@pytest.mark.parametrize("bound", AWKWARD, ids=[f"{b:#x}" for b in AWKWARD])
def test_the_modulo_region_has_its_exact_share(bound):
    assert abs(region_z(_source(bound % 1000), bound)) < Z_LIMIT


@pytest.mark.parametrize("bound", [3, 5, 7, 9, 15, 17, 31, 33, 63, 65, 100, 1000, 4097])
def test_small_bounds_are_uniform_by_chi_squared(bound):
    x = _source(bound).below(bound, DRAWS)
    counts = np.bincount(x, minlength=bound)
    assert counts.size == bound
    expected = DRAWS / bound
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert chi2.sf(stat, bound - 1) > P_LIMIT


@pytest.mark.parametrize("bound", [2 ** 31 + 1, 2 ** 33 + 1, 3 * 2 ** 60])
def test_high_and_low_halves_and_the_top_value(bound):
    """The top of the range is reached with its share and nothing at or above the bound comes out."""
    x = _source(7).below(bound, DRAWS)
    assert x.max() < bound
    top = float(np.mean(x >= bound - bound // 4))  # the top quarter
    p = (bound // 4) / bound
    assert abs(top - p) / math.sqrt(p * (1 - p) / DRAWS) < Z_LIMIT


def test_edge_bounds():
    ints = _source(1)
    assert ints.below(1, 10).tolist() == [0] * 10
    assert ints.below(2, 0).size == 0
    assert set(ints.below(2, 1000).tolist()) == {0, 1}
    for bad in (0, -1, 2 ** 62 + 1):
        with pytest.raises(ValueError, match="bound must be in"):
            ints.below(bad, 1)


@pytest.mark.parametrize("bound", [math.factorial(12), 3 * 2 ** 30, 2 ** 33 // 3, 3 * 2 ** 60])
def test_the_tests_catch_a_modulo_biased_generator(bound):
    """Power: the same statistic rejects ``word % bound`` far beyond the limit (12!: ~28 sd at 2M draws).
    (Near 2^k + 1 a modulo bias sits on a few top values only, far too rare to see in any test; the
    uniformity tests above still run there.)"""
    biased = ModuloBiased(np.random.default_rng(bound % 997).bytes)
    assert abs(region_z(biased, bound)) > 3 * Z_LIMIT


def test_the_production_source_is_uniform_at_12_factorial():
    """``os.urandom``, as the secure sampler uses it."""
    import os

    assert abs(region_z(UniformIntegers(os.urandom), math.factorial(12))) < Z_LIMIT
