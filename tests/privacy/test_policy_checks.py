"""The ``fail`` policies as noisy, charged checks: no free oracle on exact tallies."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.errors import BadInputData
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.budget_split import BudgetSplit, split_rho
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.policy_checks import FAIL_SIGMAS, check_policies, failed_checks, release_policy_checks
from privsyn_spark.release.measure_privately import measure_privately

CHECKS = {"column 'a0': values outside the declared domain": 0, "column 'a1': nulls": 500}


def test_checks_take_their_share_first_and_the_run_still_spends_its_rho_exactly(dependent_table):
    m = measure_privately(dependent_table.one_way(), dependent_table.indif(), dependent_table.count_marginals,
                          dependent_table.domain, run_id="r", schema_hash="h", epsilon=1.0, delta=1e-9,
                          sampler=SeededSamplerForTestsOnly(0), policy_counts=CHECKS)
    checks = [e for e in m.ledger if e["name"].startswith("check:")]
    assert [e["name"] for e in checks] == [f"check:{n}" for n in CHECKS]
    assert m.ledger[0]["name"].startswith("check:")  # released before anything else
    assert sum(e["rho"] for e in checks) == pytest.approx(BudgetSplit().policy_checks * m.rho)
    assert m.spent_rho == pytest.approx(m.rho, rel=1e-12)
    assert set(m.policy_checks) == set(CHECKS)
    assert failed_checks(m.policy_checks) == ["column 'a1': nulls"]
    again = Measurements.from_bytes(m.to_bytes())  # kept in the artifact: the judgement is post-processing
    assert again.policy_checks == m.policy_checks
    with pytest.raises(BadInputData, match=r"^column 'a1': nulls \(a `fail` policy: noisy tally above 5 noise sd") \
            as refused:
        check_policies(again.policy_checks)
    assert "500" not in str(refused.value)


def test_without_fail_policies_nothing_changes():
    s = BudgetSplit()
    assert split_rho(1.0, s, 5, 0) == (*s.fractions(5), 0.0)
    one_way, indif, selected, checks = split_rho(1.0, BudgetSplit(), 5, 2)
    assert checks == pytest.approx(0.05) and one_way + indif + selected + checks == pytest.approx(1.0)


def test_the_check_is_a_noisy_threshold_with_the_stated_false_stop_rate():
    """10,000 checks of a clean column (tally 0) and of one with FAIL_SIGMAS + 2 sd of bad values: the stop
    rate is the Gaussian tail beyond FAIL_SIGMAS sd (~3e-7) and ~97.7 % (within fixed tolerances)."""
    rng_sampler = SeededSamplerForTestsOnly(7)
    names = [f"c{i}" for i in range(10_000)]
    accountant = Accountant(1.0)
    clean = release_policy_checks({}, names, 0.5, accountant=accountant, sampler=rng_sampler)
    sigma = clean["c0"]["sigma"]
    dirty_names = [f"d{i}" for i in range(10_000)]
    dirty = release_policy_checks({n: int(round((FAIL_SIGMAS + 2) * sigma)) for n in dirty_names}, dirty_names, 0.5,
                                  accountant=accountant, sampler=rng_sampler)
    assert accountant.spent == pytest.approx(1.0)
    assert len(failed_checks(clean)) <= 2  # expected 0.003 of 10,000
    assert len(failed_checks(dirty)) / len(dirty_names) == pytest.approx(0.977, abs=0.01)
    assert np.mean([c["noisy"] for c in clean.values()]) == pytest.approx(0.0, abs=4 * sigma / 100)
    assert FAIL_SIGMAS == 5.0
