"""The ledger after a run as its report shows it: spent, budget and left, in rho and epsilon."""

from __future__ import annotations

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger_summary import ledger_summary
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta

RHO = rho_from_eps_delta(1.0, 1e-9)  # one run at epsilon 1


def _reserve(spark, ledger, run_id, partition=None):
    L.reserve(spark, ledger, "events", run_id, rho=RHO, epsilon=1.0, delta=1e-9, fingerprint={"input": "t"},
              artifact=f"runs/{run_id}", partition=partition)


@pytest.mark.parametrize("per_partition", [None, "day"])
def test_spent_and_left_in_rho_and_epsilon(spark, tmp_path, per_partition):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "events", 3.0, 1e-9, per_partition=per_partition)
    for run_id, day in (("a1", "2024-01-01"), ("a2", "2024-01-01"), ("b1", "2024-01-02")):
        _reserve(spark, ledger, run_id, {"day": day})
    state = L.dataset_state(spark, ledger, "events")
    got = ledger_summary(state, ledger, "events", "b1", {"day": "2024-01-02"}, "day=2024-01-02")
    budget = rho_from_eps_delta(3.0, 1e-9)
    runs = 1 if per_partition else 3  # per partition: only day 2024-01-02's one run counts
    assert got["spent_rho"] == pytest.approx(runs * RHO, rel=1e-12)
    assert got["budget_rho"] == pytest.approx(budget, rel=1e-12) and got["budget_epsilon"] == 3.0
    assert got["left_rho"] == pytest.approx(budget - runs * RHO, rel=1e-9)
    assert got["spent_epsilon"] == pytest.approx(eps_from_rho(runs * RHO, 1e-9), rel=1e-9)
    assert got["left_epsilon"] == pytest.approx(eps_from_rho(budget - runs * RHO, 1e-9), rel=1e-9)
    assert got["budget_delta"] == 1e-9 and got["partition"] == "day=2024-01-02" and got["dataset_id"] == "events"
    if per_partition:
        assert got["spent_epsilon"] == pytest.approx(1.0, rel=1e-6)


def test_no_budget_no_epsilon(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "other", 1.0, 1e-9)  # the ledger exists; "events" has no budget
    got = ledger_summary(L.dataset_state(spark, ledger, "events"), ledger, "events", "r")
    assert got == {"ledger": ledger, "dataset_id": "events", "spent_rho": 0.0, "budget_rho": None, "left_rho": 0.0}
