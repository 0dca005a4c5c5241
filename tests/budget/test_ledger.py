"""The budget ledger: budgets stored once, refusals, reservations reused, committed, refunded, and
concurrent writers racing (for the last of a budget, for one run id, creating the ledger)."""

from __future__ import annotations

import math
import threading
import uuid

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.dataset_budget import check_budget
from privsyn_spark.budget.ledger_show import describe
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta

FP = {"epsilon": 1.0, "delta": 1e-9, "schema_hash": "h", "input": "/data/in.csv"}


def _reserve(spark, ledger, run_id, rho, dataset="adult", **kw):
    return L.reserve(spark, ledger, dataset, run_id, rho=rho, epsilon=1.0, delta=1e-9,
                     fingerprint=kw.pop("fingerprint", FP), artifact=f"/runs/{run_id}/m.npz", **kw)


def _race(calls):
    """Run the callables at once (threads sharing the session); their results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(i, call):
        barrier.wait()
        try:
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return results


@pytest.mark.parametrize("epsilon, delta", [(0, 1e-9), (-1, 1e-9), (math.nan, 1e-9), (math.inf, 1e-9),
                                            (1, 0), (1, 1), (1, math.nan)])
def test_zero_negative_nan_budgets_are_rejected(epsilon, delta):
    with pytest.raises(UsageError, match="epsilon|delta"):
        check_budget(epsilon, delta)


@pytest.mark.slow
def test_budget_set_once_reservations_refusals_commit_and_refund(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    with pytest.raises(L.NoBudget, match="budget set"):  # no budget yet: refused, nothing recorded
        _reserve(spark, ledger, "r0", 0.1)
    budget = L.set_budget(spark, ledger, "adult", 1.5, 1e-9)
    assert budget.rho == pytest.approx(rho_from_eps_delta(1.5, 1e-9))
    assert L.set_budget(spark, ledger, "adult", 1.5, 1e-9) == budget  # the same again: a no-op
    with pytest.raises(UsageError, match="--replace"):
        L.set_budget(spark, ledger, "adult", 100, 1e-9)
    with pytest.raises(UsageError):
        L.set_budget(spark, ledger, "adult", math.nan, 1e-9)

    rho = rho_from_eps_delta(1.0, 1e-9)
    first = _reserve(spark, ledger, "demo", rho)
    assert first.charged and first.spent_before == 0.0
    again = _reserve(spark, ledger, "demo", rho)  # a retry: the same reservation, not charged
    assert not again.charged and again.seq == first.seq and again.held.attempt == first.held.attempt
    assert again.held.status == "uncommitted"
    with pytest.raises(L.RunMismatch, match="epsilon"):
        _reserve(spark, ledger, "demo", rho, fingerprint={**FP, "epsilon": 5.0})
    L.commit(spark, ledger, first, "/runs/demo/m.npz", "abc")
    held = L.dataset_state(spark, ledger, "adult").active("demo")
    assert held.status == "committed" and held.artifact_sha256 == "abc"
    assert not L.refund(spark, ledger, first)  # never after a commit

    second = _reserve(spark, ledger, "demo2", rho)  # eps 1 + eps 1 compose to ~1.44 < 1.5 in zCDP
    assert second.charged
    with pytest.raises(L.BudgetExhausted) as info:
        _reserve(spark, ledger, "demo3", rho)
    assert isinstance(info.value, BudgetRefused) and "'adult'" in str(info.value)
    assert L.refund(spark, ledger, second)  # demo2 failed before drawing noise: its rho is free again
    assert _reserve(spark, ledger, "demo3", rho).charged
    state = L.dataset_state(spark, ledger, "adult")
    assert state.spent_rho == pytest.approx(2 * rho) and state.spent_rho <= state.budget.rho
    assert [(r.run_id, r.status) for r in state.reservations] == [
        ("demo", "committed"), ("demo2", "refunded"), ("demo3", "uncommitted")]
    text = "\n".join(describe(state))
    assert f"spent:  epsilon={eps_from_rho(2 * rho, 1e-9):.6g}" in text and "left:" in text
    assert "run 'demo2'" in text and "refunded" in text

    # a recharge: the lost release stays charged, a fresh one is charged on top
    state_before = L.dataset_state(spark, ledger, "adult").spent_rho
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9, replace=True)
    fresh = _reserve(spark, ledger, "demo3", rho, recharge_of=state.active("demo3").seq)
    assert fresh.charged and fresh.seq != state.active("demo3").seq
    after = L.dataset_state(spark, ledger, "adult")
    assert after.spent_rho == pytest.approx(state_before + rho)
    assert after.budget.epsilon == 3.0 and len(after.budget_history) == 2
    # other datasets have their own budget
    with pytest.raises(L.NoBudget):
        _reserve(spark, ledger, "r", 0.01, dataset="census")


@pytest.mark.slow
def test_two_first_runs_on_a_fresh_ledger_both_succeed(spark, tmp_path):
    ledger = str(tmp_path / f"ledger-{uuid.uuid4().hex[:6]}")  # created by the racing writers themselves

    def first_run(dataset):
        L.set_budget(spark, ledger, dataset, 2.0, 1e-9)
        return _reserve(spark, ledger, f"run-{dataset}", 0.01, dataset=dataset)

    results = _race([lambda: first_run("a"), lambda: first_run("b")])
    assert all(not isinstance(r, Exception) for r in results), [repr(r)[:2000] for r in results]
    assert all(r.charged for r in results)
    assert {d.dataset_id for d in L.all_datasets(spark, ledger)} == {"a", "b"}


@pytest.mark.slow
def test_racing_for_the_last_of_a_budget_and_for_one_run_id(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 1.0, 1e-9)
    rho = rho_from_eps_delta(0.8, 1e-9)  # one fits, two do not
    results = _race([lambda i=i: _reserve(spark, ledger, f"run-{i}", rho) for i in range(2)])
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1 and won[0].charged, results
    assert len(lost) == 1 and isinstance(lost[0], L.BudgetExhausted), results

    # two attempts of one run: exactly one holds the reservation (the only one that may draw noise)
    L.set_budget(spark, ledger, "census", 5.0, 1e-9)
    results = _race([lambda: _reserve(spark, ledger, "same", 0.01, dataset="census") for _ in range(2)])
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(r.charged for r in results) == [False, True]
    assert len({r.held.attempt for r in results}) == 1
    assert len(L.dataset_state(spark, ledger, "census").reservations) == 1


@pytest.mark.slow
def test_an_old_ledger_is_read_and_gets_the_new_columns(spark, tmp_path):
    """A ledger written before `extra_delta`: read as it is (missing = 0), upgraded in place
    on its next write; its old reservations are never taken over (their attempts did not record draws)."""
    from datetime import datetime

    from privsyn_spark.budget.ledger_table import _FIRST_COLUMNS, LEDGER_COLUMNS

    old_columns = ", ".join(LEDGER_COLUMNS.split(", ")[:_FIRST_COLUMNS])  # before the unit, partition, extra_delta
    ledger = str(tmp_path / "old-ledger")
    budget = check_budget(2.0, 1e-9)
    now = datetime(2026, 1, 1)
    rows = [("adult", 1, "budget", None, budget.rho, 2.0, 1e-9, None, None, None, None, now),
            ("adult", 2, "reserve", "old-run", 0.01, 1.0, 1e-9, "a1", "/runs/old", None, '{"epsilon": 1.0}', now)]
    spark.createDataFrame(rows, old_columns).write.format("delta").save(ledger)
    state = L.dataset_state(spark, ledger, "adult")
    assert state.spent_rho == pytest.approx(0.01) and state.spent_extra_delta == 0.0
    assert not state.reservations[0].records_draws and not state.reservations[0].provably_undrawn
    held = _reserve(spark, ledger, "new-run", 0.01)
    assert held.charged and held.held.records_draws
    assert L.read_ledger(spark, ledger).columns[-1] == "extra_delta"
    after = L.dataset_state(spark, ledger, "adult")
    assert after.spent_rho == pytest.approx(0.02) and [r.run_id for r in after.reservations] == ["old-run", "new-run"]
    assert "guarantee: (" in "\n".join(describe(after))
