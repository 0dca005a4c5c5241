"""Where the ledger is: a damaged log is said to be damaged (never missing, never contention), a catalog
name on the in-memory catalog is refused, a creation that fails for another reason than a concurrent
creator fails at once, and a local ledger is read without Spark as Spark reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger_store import LedgerDamaged, LedgerMissing
from privsyn_spark.budget.ledger_table import ensure_ledger, local_states
from privsyn_spark.errors import EXIT_BUDGET, UsageError

ROOT = Path(__file__).resolve().parents[2]


def damaged_ledger(spark, folder) -> str:
    """A ledger of five commits whose versions 2 and 3 were deleted (no checkpoint covers them)."""
    ledger = str(folder)
    L.set_budget(spark, ledger, "adult", 5.0, 1e-9)  # versions 0 (create) and 1
    for i in range(3):  # versions 2-4
        L.record_nonprivate(spark, ledger, "other", f"r{i}", "test")
    for version in (2, 3):
        (folder / "_delta_log" / f"{version:020d}.json").unlink()
    return ledger


def test_a_damaged_ledger_is_reported_as_damaged_at_once(spark, tmp_path):
    ledger = damaged_ledger(spark, tmp_path / "ledger")
    for call in (lambda: L.dataset_state(spark, ledger, "adult"),
                 lambda: L.require_ledger(spark, ledger),
                 lambda: L.set_budget(spark, ledger, "adult", 5.0, 1e-9),  # once: waited 120 s on "creation"
                 lambda: local_states(ledger, "adult")):
        with pytest.raises(LedgerDamaged, match=r"the ledger at .*ledger is damaged \(versions 2-3 missing\): "
                                                r"restore it") as refused:
            call()
        assert refused.value.exit_code == EXIT_BUDGET and "\n" not in str(refused.value)
    assert not isinstance(refused.value, LedgerMissing)


def test_a_catalog_name_on_the_in_memory_catalog_is_refused(spark):
    assert spark.conf.get("spark.sql.catalogImplementation") == "in-memory"
    with pytest.raises(UsageError, match=r"--ledger privsyn_memory_ledger: a table name in Spark's in-memory "
                                         r"catalog .* is forgotten when the session ends.*--ledger runs/ledger"):
        L.set_budget(spark, "privsyn_memory_ledger", "adult", 1.0, 1e-9)
    assert not spark.catalog.tableExists("privsyn_memory_ledger")


def test_a_creation_failing_for_another_reason_than_a_concurrent_creator_fails_at_once(spark, tmp_path):
    afile = tmp_path / "not-a-folder"
    afile.write_text("x")
    with pytest.raises(UsageError, match=r"could not create the budget ledger at .*not-a-folder: "):
        ensure_ledger(spark, str(afile), wait_seconds=60)  # once: retried for the whole wait, then Delta's trace


def test_a_local_ledger_is_read_without_spark_as_spark_reads_it(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9)
    L.set_budget(spark, ledger, "census", 2.0, 1e-9)
    held = L.reserve(spark, ledger, "adult", "r1", rho=0.01, epsilon=1.0, delta=1e-9, fingerprint={"x": 1},
                     artifact="a")
    L.commit(spark, ledger, held, "a", "sha")
    assert local_states(ledger) == L.all_datasets(spark, ledger)
    assert local_states(ledger, "adult") == [L.dataset_state(spark, ledger, "adult")]
    with pytest.raises(LedgerMissing, match="no budget ledger at"):
        local_states(str(tmp_path / "typo"))
    assert local_states("db.ledger") is None  # a catalog table: Spark reads it


def test_a_local_read_takes_every_file_and_the_process_exits_cleanly(spark, tmp_path):
    """The rows of a table whose files differ in columns (a ledger written before a schema merge) are all
    read, the missing column as null; and ``budget show`` of a local ledger exits 0 every time (delta-rs's
    own scan could abort the interpreter at exit, one run in four)."""
    from privsyn_spark.runtime import delta_rs

    table = str(tmp_path / "merged")
    spark.createDataFrame([(1,)], "a int").write.format("delta").save(table)
    spark.createDataFrame([(2, "x")], "a int, b string").write.format("delta").mode("append") \
        .option("mergeSchema", "true").save(table)
    assert sorted(delta_rs.read_rows(table), key=lambda r: r["a"]) == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]

    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 3.0, 1e-9)
    show = [sys.executable, "-m", "privsyn_spark.cli", "budget", "show", "--ledger", ledger, "--dataset-id", "adult"]
    codes = [subprocess.run(show, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode
             for _ in range(12)]
    assert codes == [0] * 12
