"""The budget ledger: refusals, idempotent retries, and concurrent runs racing for the last of a budget."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import pytest

from privsyn_spark.write.ledger import (BudgetExhausted, read_ledger, reserve, reserve_for_run, spent_rho)


def _race(spark, ledger, dataset_id, asks, budget):
    """Start one reservation per entry of ``asks`` at once (threads sharing the session)."""
    barrier = threading.Barrier(len(asks))
    results: list = [None] * len(asks)

    def worker(i, rho):
        barrier.wait()
        try:
            results[i] = reserve(spark, ledger, dataset_id, f"run-{i}", rho, budget, backoff_seconds=0.01)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i, rho)) for i, rho in enumerate(asks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


@pytest.mark.slow
def test_refuses_over_budget_and_retries_are_free(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    first = reserve(spark, ledger, "adult", "r1", 0.4, 1.0)
    assert first.charged and first.seq == 1 and first.spent_before == 0.0
    again = reserve(spark, ledger, "adult", "r1", 0.4, 1.0)  # a retry of the same run
    assert not again.charged and again.seq == 1
    second = reserve(spark, ledger, "adult", "r2", 0.5, 1.0)
    assert second.seq == 2 and second.spent_before == pytest.approx(0.4)
    with pytest.raises(BudgetExhausted) as info:
        reserve(spark, ledger, "adult", "r3", 0.2, 1.0)
    message = str(info.value)
    assert "'adult'" in message and "0.2" in message and "0.9" in message and "budget rho=1" in message
    assert info.value.spent == pytest.approx(0.9)
    with pytest.raises(ValueError, match="already reserved"):
        reserve(spark, ledger, "adult", "r1", 0.6, 1.0)
    # other datasets have their own budget
    assert reserve(spark, ledger, "census", "r3", 0.2, 1.0).charged
    assert spent_rho(spark, ledger, "adult") == pytest.approx(0.9)
    rows = read_ledger(spark, ledger).orderBy("dataset_id", "seq").collect()
    assert [(r["dataset_id"], r["seq"], r["run_id"], r["step"]) for r in rows] == [
        ("adult", 1, "r1", "measure"), ("adult", 2, "r2", "measure"), ("census", 1, "r3", "measure")]
    assert all(r["recorded_at"] is not None for r in rows)


def test_reserve_for_run_uses_the_runs_rho(spark, tmp_path):
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    config = SimpleNamespace(ledger=str(tmp_path / "ledger"), dataset_id=None, input="in.csv", run_id="x",
                             epsilon=1.0, delta=1e-9, dataset_rho_budget=rho_from_eps_delta(1.2, 1e-9))
    held = reserve_for_run(spark, config)
    assert held.dataset_id == "in.csv" and held.rho == pytest.approx(rho_from_eps_delta(1.0, 1e-9))
    with pytest.raises(BudgetExhausted, match="in.csv"):
        reserve_for_run(spark, SimpleNamespace(**{**vars(config), "run_id": "y"}))
    assert reserve_for_run(spark, SimpleNamespace(**{**vars(config), "ledger": None})) is None


@pytest.mark.slow
@pytest.mark.parametrize("repeat", range(3))
def test_two_concurrent_runs_cannot_both_spend_the_last_of_the_budget(spark, tmp_path, repeat):
    ledger = str(tmp_path / "ledger")
    reserve(spark, ledger, "warmup", "w", 0.1, None)  # the ledger exists: the race is on the commit
    results = _race(spark, ledger, "adult", [0.6, 0.6], 1.0)
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1 and won[0].charged, results
    assert len(lost) == 1 and isinstance(lost[0], BudgetExhausted), results
    assert spent_rho(spark, ledger, "adult") == pytest.approx(0.6)
    assert read_ledger(spark, ledger, "adult").count() == 1


@pytest.mark.slow
def test_many_concurrent_runs_on_a_fresh_ledger(spark, tmp_path):
    ledger = str(tmp_path / f"ledger-{uuid.uuid4().hex[:6]}")  # created by the racing runs themselves
    results = _race(spark, ledger, "adult", [0.3] * 4, 1.0)
    won = [r for r in results if not isinstance(r, Exception)]
    assert len(won) == 3, results
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], BudgetExhausted), [repr(e)[:2000] for e in errors]
    rows = read_ledger(spark, ledger, "adult").collect()
    assert sorted(r["seq"] for r in rows) == [1, 2, 3]
    assert sum(r["rho"] for r in rows) <= 1.0
