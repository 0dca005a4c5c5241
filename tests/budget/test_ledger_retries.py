"""The ledger's retries: a write that loses its commit race is retried (a bounded number of times, then
LedgerContention), any other error is raised at once; a creation meeting another writer's creation waits
for it, until its deadline."""

from __future__ import annotations

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget import ledger_table
from privsyn_spark.errors import UsageError


class ConcurrentAppendException(Exception):
    """Named like Delta's commit conflict (what ``_is_conflict`` recognises by its name)."""


def flaky_merge(monkeypatch, failures: list[Exception]) -> list[int]:
    """``merge_insert`` raising each of ``failures`` once, in order, then the real one; returns its call log."""
    real, calls = ledger_table.merge_insert, []

    def merge(*args, **kwargs):
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return real(*args, **kwargs)
    monkeypatch.setattr(ledger_table, "merge_insert", merge)
    return calls


def test_a_lost_commit_race_is_retried_until_the_row_is_written(spark, tmp_path, monkeypatch):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9)
    calls = flaky_merge(monkeypatch, [ConcurrentAppendException("lost"), ConcurrentAppendException("lost")])
    L.record_nonprivate(spark, ledger, "adult", "r1", "test")
    assert len(calls) == 3
    assert len(L.dataset_state(spark, ledger, "adult").nonprivate) == 1  # written once


def test_only_a_commit_conflict_is_retried(spark, tmp_path, monkeypatch):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9)
    calls = flaky_merge(monkeypatch, [OSError("disk full")])
    with pytest.raises(OSError, match="disk full"):
        L.record_nonprivate(spark, ledger, "adult", "r1", "test")
    assert len(calls) == 1 and L.dataset_state(spark, ledger, "adult").nonprivate == []


def test_every_attempt_lost_is_contention_and_writes_nothing(spark, tmp_path, monkeypatch):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9)
    calls = flaky_merge(monkeypatch, [ConcurrentAppendException("lost") for _ in range(3)])
    with pytest.raises(L.LedgerContention, match="3 attempts lost to concurrent writers"):
        ledger_table.append_row(spark, ledger, "adult", lambda state: {"kind": "nonprivate", "run_id": "r1"},
                                max_attempts=3, backoff_seconds=0.0)
    assert len(calls) == 3 and L.dataset_state(spark, ledger, "adult").nonprivate == []


def test_a_creation_midway_is_waited_for_until_the_deadline(spark, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger"
    (ledger / "_delta_log").mkdir(parents=True)  # another writer's creation, its first commit not there yet
    calls = []

    def midway(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("[DELTA_TABLE_NOT_FOUND] the table is being created")
    monkeypatch.setattr(ledger_table, "create_if_not_exists", midway)
    with pytest.raises(UsageError, match=r"still being created by another writer after 1 s \(Delta: \[DELTA_TABLE_NOT"):
        ledger_table.ensure_ledger(spark, str(ledger), wait_seconds=1)
    assert len(calls) >= 2  # retried while it waited


def test_a_creation_that_lands_between_a_look_and_a_commit_is_used(spark, tmp_path, monkeypatch):
    ledger = str(tmp_path / "ledger")
    create = ledger_table.create_if_not_exists
    calls = []

    def overtaken(spark_, location, *args):
        calls.append(1)
        if len(calls) == 1:  # the other writer's first commit lands after this one looked, before it committed
            create(spark_, location, *args)
            raise RuntimeError(f"[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table ('{location}'). "
                               f"The associated location ('{location}') is not empty and also not a Delta table.")
        create(spark_, location, *args)
    monkeypatch.setattr(ledger_table, "create_if_not_exists", overtaken)
    ledger_table.ensure_ledger(spark, ledger, wait_seconds=30)
    assert len(calls) == 1  # the retry found the winner's ledger ready and used it
    L.set_budget(spark, ledger, "adult", 1.0, 1e-9)
    assert L.dataset_state(spark, ledger, "adult").budget.epsilon == 1.0
