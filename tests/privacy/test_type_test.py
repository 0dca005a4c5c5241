"""The private type test: one noisy release per column (L2 sensitivity sqrt(6) K), the type decided after."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.type_test import TYPE_CANDIDATES, release_type
from privsyn_spark.privacy.unit import PrivacyUnit

RHO = 0.01  # sigma = sqrt(6) / sqrt(0.02) = 17.3: a bar of 52 misses


@pytest.mark.parametrize("misses, expected", [
    ((0, 0, 0, 1000, 1000), "int"),
    ((200, 0, 0, 1000, 1000), "long"),     # 200 values beyond the int range
    ((20, 20, 20, 1000, 1000), "int"),     # 20 that parse as nothing: under the bar, read as null
    ((400, 400, 0, 1000, 1000), "double"),
    ((1000, 1000, 1000, 0, 0), "date"),
    ((1000, 1000, 1000, 1000, 0), "timestamp"),
    ((1000, 1000, 1000, 1000, 1000), None),  # text
    ((990, 990, 990, 990, 990), None),
])
def test_the_first_type_whose_noisy_misses_are_under_the_bar_is_taken(misses, expected):
    for seed in range(10):
        got = release_type(np.asarray([1000, *misses]), RHO, accountant=Accountant(RHO),
                           sampler=SeededSamplerForTestsOnly(seed), name="c")
        assert got == expected


def test_too_few_values_stay_text_and_the_release_is_charged_at_its_sensitivity():
    accountant = Accountant(1.0)
    assert release_type(np.asarray([60, 0, 0, 0, 60, 60]), RHO, accountant=accountant,
                        sampler=SeededSamplerForTestsOnly(0), name="c") is None  # 60 values: under twice the bar
    unit = PrivacyUnit(("id",), 4)
    release_type(np.zeros(1 + len(TYPE_CANDIDATES), dtype=np.int64), RHO, accountant=accountant,
                 sampler=SeededSamplerForTestsOnly(0), name="d", unit=unit)
    first, second = accountant.ledger
    assert first["name"] == "c:type" and first["rho"] == RHO and first["sensitivity"] == pytest.approx(math.sqrt(6))
    assert second["sensitivity"] == pytest.approx(4 * math.sqrt(6))
    with pytest.raises(ValueError, match="expected 6 counts"):
        release_type(np.zeros(3, dtype=np.int64), RHO, accountant=accountant, sampler=SeededSamplerForTestsOnly(0),
                     name="e")
