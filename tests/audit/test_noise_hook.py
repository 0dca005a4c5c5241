"""The audit's test-only noise hook: off unless a test turns it on in-process, named in the ledger when
on, and never called by production code."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privsyn_spark.privacy import noise
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.noise import SecureDiscreteGaussian, gaussian_mechanism, seeded_noise_for_tests_only


def _release(sampler: SecureDiscreteGaussian) -> tuple[np.ndarray, str]:
    acct = Accountant(1.0)
    noisy, _ = gaussian_mechanism(np.zeros(64, dtype=np.int64), 0.5, accountant=acct, sampler=sampler, name="t")
    return noisy, acct.ledger[0]["noise_source"]


def test_the_hook_gives_two_runs_the_same_noise_and_says_so_in_the_ledger():
    sampler = SecureDiscreteGaussian()
    with seeded_noise_for_tests_only(3):
        first, source = _release(sampler)
    with seeded_noise_for_tests_only(3):
        second, _ = _release(SecureDiscreteGaussian())
    assert np.array_equal(first, second) and source == "SeededSamplerForTestsOnly"
    with pytest.raises(RuntimeError, match="already on"), seeded_noise_for_tests_only(3), \
            seeded_noise_for_tests_only(4):
        pass


def test_the_hook_is_off_by_default_and_after_its_block():
    assert noise._TEST_ONLY_STREAM is None
    with seeded_noise_for_tests_only(3):
        pass
    first, source = _release(SecureDiscreteGaussian())
    second, _ = _release(SecureDiscreteGaussian())
    assert source == "SecureDiscreteGaussian" and not np.array_equal(first, second)


def test_production_code_never_turns_the_hook_on():
    package = Path(noise.__file__).resolve().parents[1]
    offenders = [str(p) for p in package.rglob("*.py")
                 if p.name != "noise.py" and "seeded_noise_for_tests_only" in p.read_text()]
    assert offenders == []
