"""Budgets over partitions in the ledger: shared (every run charges the dataset) and per partition
(parallel composition), the forecast, refusals (exhausted, mixing), and ledgers of the earlier version."""

from __future__ import annotations

import math

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger_show import describe
from privsyn_spark.budget.ledger_state import runs_left
from privsyn_spark.cli import main
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta
from privsyn_spark.privacy.unit import PrivacyUnit

RHO = rho_from_eps_delta(1.0, 1e-9)  # one run at epsilon 1


def _reserve(spark, ledger, dataset, run_id, partition=None):
    return L.reserve(spark, ledger, dataset, run_id, rho=RHO, epsilon=1.0, delta=1e-9,
                     fingerprint={"input": "t"}, artifact=f"runs/{run_id}", partition=partition)


def test_runs_left_is_the_floor_of_left_over_rho():
    assert runs_left(3 * RHO, RHO) == 3 and runs_left(3 * RHO * (1 - 1e-12), RHO) == 3  # float tolerance
    assert runs_left(2.99 * RHO, RHO) == 2 and runs_left(0.0, RHO) == 0


def test_shared_budget_every_partition_charges_the_dataset_and_the_forecast_counts_down(spark, tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    budget_eps = eps_from_rho(2.5 * RHO, 1e-9)  # 2 runs at epsilon 1 fit, a third does not
    L.set_budget(spark, ledger, "events", budget_eps, 1e-9)
    state = L.dataset_state(spark, ledger, "events")
    assert "forecast: 2 more run(s) fit at epsilon=1" in "\n".join(describe(state, (1.0, RHO)))
    _reserve(spark, ledger, "events", "d1", {"day": "2024-01-01"})
    assert main(["budget", "show", "--ledger", ledger, "--epsilon", "1"]) == 0
    shown = capsys.readouterr().out
    assert "forecast: 1 more run(s) fit at epsilon=1" in shown and "run 'd1' [day=2024-01-01]" in shown
    check = ["budget", "check", "--ledger", ledger, "--dataset-id", "events", "--epsilon", "1"]
    assert main([*check, "--run-id", "d2", "--partition", "day=2024-01-02"]) == 0
    assert "fits" in capsys.readouterr().out
    _reserve(spark, ledger, "events", "d2", {"day": "2024-01-02"})
    assert main([*check, "--run-id", "d2", "--partition", "day=2024-01-02"]) == 0  # a retry: already charged
    assert "already holds reservation" in capsys.readouterr().out
    assert main([*check, "--run-id", "d3", "--partition", "day=2024-01-03"]) == 3  # the day the budget runs out
    err = capsys.readouterr().err.strip()
    assert "exhausted" in err and len(err.splitlines()) == 1
    with pytest.raises(L.BudgetExhausted):
        _reserve(spark, ledger, "events", "d3", {"day": "2024-01-03"})


def test_per_partition_budget_charges_each_partition_on_its_own(spark, tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    assert main(["budget", "set", "--ledger", ledger, "--dataset-id", "events", "--epsilon",
                 repr(eps_from_rho(2.5 * RHO, 1e-9)), "--delta", "1e-9", "--per-partition", "day"]) == 0
    assert "per partition of 'day'" in capsys.readouterr().out
    for run_id, day in (("a1", "2024-01-01"), ("a2", "2024-01-01"), ("b1", "2024-01-02")):
        held = _reserve(spark, ledger, "events", run_id, {"day": day, "region": "EU"})
        assert held.charged
    state = L.dataset_state(spark, ledger, "events")
    assert state.partitions() == pytest.approx({"2024-01-01": 2 * RHO, "2024-01-02": RHO})
    assert state.left_in("2024-01-01") == pytest.approx(0.5 * RHO) and state.left_in("2024-01-09") == state.budget.rho
    with pytest.raises(L.BudgetExhausted, match=r"partition day=2024-01-01"):
        _reserve(spark, ledger, "events", "a3", {"day": "2024-01-01"})
    _reserve(spark, ledger, "events", "b2", {"day": "2024-01-02"})  # another day still has its own budget
    with pytest.raises(L.MixedBudget, match="shared runs are refused"):
        _reserve(spark, ledger, "events", "all", None)
    with pytest.raises(L.MixedBudget):
        _reserve(spark, ledger, "events", "eu", {"region": "EU"})  # scoped, but not to a day
    assert main(["budget", "show", "--ledger", ledger, "--dataset-id", "events", "--epsilon", "1"]) == 0
    shown = capsys.readouterr().out
    assert "partition day=2024-01-01: spent" in shown and "; 0 more run(s) at epsilon=1" in shown
    assert "forecast: a new partition fits 2 run(s)" in shown
    assert main(["budget", "check", "--ledger", ledger, "--dataset-id", "events", "--epsilon", "1",
                 "--partition", "day=2024-01-03"]) == 0
    assert "left on partition day=2024-01-03 after it" in capsys.readouterr().out
    # switching kind after spending is refused both ways
    with pytest.raises(L.MixedBudget, match="never mix"):
        L.set_budget(spark, ledger, "events", 9.0, 1e-9, replace=True)
    L.set_budget(spark, ledger, "shared", 9.0, 1e-9)
    _reserve(spark, ledger, "shared", "s1", {"day": "2024-01-01"})
    assert main(["budget", "set", "--ledger", ledger, "--dataset-id", "shared", "--epsilon", "9", "--delta", "1e-9",
                 "--replace", "--per-partition", "day"]) == 3
    assert "never mix" in capsys.readouterr().err
    assert isinstance(L.MixedBudget("x"), BudgetRefused)


OLD_COLUMNS = ("dataset_id STRING, seq BIGINT, kind STRING, run_id STRING, rho DOUBLE, epsilon DOUBLE, "
               "delta DOUBLE, attempt STRING, artifact STRING, artifact_sha256 STRING, fingerprint STRING, "
               "recorded_at TIMESTAMP")


def test_a_ledger_of_the_earlier_version_is_read_and_upgraded_on_write(spark, tmp_path):
    ledger = str(tmp_path / "old")
    rows = [("events", 1, "budget", None, 10 * RHO, eps_from_rho(10 * RHO, 1e-9), 1e-9, None, None, None, None, None),
            ("events", 2, "reserve", "r1", RHO, 1.0, 1e-9, "att", "runs/r1", None, '{"input": "t"}', None)]
    spark.createDataFrame(rows, OLD_COLUMNS).write.format("delta").save(ledger)
    state = L.dataset_state(spark, ledger, "events")
    assert state.budget.per_partition is None and state.reservations[0].partition is None
    assert math.isclose(state.spent_rho, RHO)
    _reserve(spark, ledger, "events", "r2", {"day": "2024-01-01"})  # adds the new columns, then writes
    state = L.dataset_state(spark, ledger, "events")
    assert [r.partition for r in state.reservations] == [None, {"day": "2024-01-01"}]
    columns = spark.read.format("delta").load(ledger).columns
    assert columns[:12] == [c.split()[0] for c in OLD_COLUMNS.split(", ")] and columns[-3:] == [
        "partition_values", "per_partition", "extra_delta"]


def test_a_person_unit_budgeted_per_partition_needs_the_declaration(spark, tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    person = ["budget", "set", "--ledger", ledger, "--dataset-id", "people", "--epsilon", "1", "--delta", "1e-9",
              "--privacy-id", "pid", "--per-partition", "day"]
    assert main(person) == 2  # refused before Spark starts: people may span days
    err = capsys.readouterr().err.strip()
    assert "holds only when 'day' is constant per person" in err and len(err.splitlines()) == 1, err
    with pytest.raises(UsageError, match="--partition-constant-per-person"):
        L.set_budget(spark, ledger, "people", 1.0, 1e-9, privacy_unit="pid", per_partition="day")
    assert main(["budget", "set", "--ledger", ledger, "--dataset-id", "rows", "--epsilon", "1", "--delta", "1e-9",
                 "--per-partition", "day", "--partition-constant-per-person"]) == 2  # a row unit: nothing to declare
    assert "needs --per-partition and --privacy-id" in capsys.readouterr().err
    assert main([*person, "--partition-constant-per-person"]) == 0
    assert "declared: 'day' is constant per person" in capsys.readouterr().out
    assert L.dataset_state(spark, ledger, "people").budget.constant_per_person
    assert main(["budget", "show", "--ledger", ledger, "--dataset-id", "people"]) == 0
    assert "declared: 'day' is constant per person" in capsys.readouterr().out
    held = L.reserve(spark, ledger, "people", "p1", rho=RHO, epsilon=1.0, delta=1e-9,
                                fingerprint={"input": "t"}, artifact="runs/p1", unit=PrivacyUnit(("pid",), 2),
                                partition={"day": "2024-01-01"})
    assert held.charged


def test_an_undeclared_person_budget_of_an_earlier_version_refuses_runs(spark, tmp_path):
    ledger = str(tmp_path / "old")
    rows = [("people", 1, "budget", None, 10 * RHO, eps_from_rho(10 * RHO, 1e-9), 1e-9, None, None, None, None, None,
             "pid", None, None, "day", None)]
    spark.createDataFrame(rows, OLD_COLUMNS + ", privacy_unit STRING, max_rows_per_id BIGINT, "
                          "partition_values STRING, per_partition STRING, extra_delta DOUBLE"
                          ).write.format("delta").save(ledger)
    state = L.dataset_state(spark, ledger, "people")
    assert any(line.startswith("  UNSOUND: ") for line in describe(state))
    with pytest.raises(L.MixedBudget, match="constant per person"):
        L.reserve(spark, ledger, "people", "p1", rho=RHO, epsilon=1.0, delta=1e-9, fingerprint={"input": "t"},
                  artifact="runs/p1", unit=PrivacyUnit(("pid",), 2), partition={"day": "2024-01-01"})
