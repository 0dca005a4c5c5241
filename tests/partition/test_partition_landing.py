"""A scoped run on a partition whose data has not landed yet, through the real CLI: refused before the
reservation (exit 4: the file listing is metadata, no release); once the rows land, the same run id (an
Airflow retry, a cleared task, a backfill) measures them; rows landing in another partition leave it
reusable; its own partition changing is a one-line exit 2 naming the way forward, never a stale reuse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.api import SAMPLE_SCHEMA
from privsyn_spark.budget import ledger as L
from tests.partition.conftest import write_days

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _land(spark, table: Path, day: str, rows: int = 200) -> None:
    """Append ``rows`` Adult rows to ``table``'s partition ``day`` (a new commit)."""
    write_days(spark, table.parent / f"landing-{day}-{rows}", days=(day,), rows=rows)
    spark.read.format("delta").load(str(table.parent / f"landing-{day}-{rows}")).write.format("delta") \
        .mode("append").save(str(table))


def _measure(table: Path, tmp_path: Path, ledger: str, day: str) -> subprocess.CompletedProcess:
    argv = ["measure", "--input", str(table), "--schema", SAMPLE_SCHEMA, "--runs-dir", str(tmp_path / "runs"),
            "--epsilon", "1", "--ledger", ledger, "--dataset-id", "events", "--partition", f"day={day}",
            "--run-id", f"events.day_{day}", "--master", "local[2]"]
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=900)


def test_a_partition_before_its_data_lands_is_refused_then_measured_then_bound_to_its_files(spark, tmp_path):
    table = write_days(spark, tmp_path / "events", days=("2024-01-01", "2024-01-02"), rows=300)
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "events", 3.0, 1e-9, per_partition="day")

    early = _measure(table, tmp_path, ledger, "2024-01-03")  # the day's data has not landed
    assert early.returncode == 4, early.stderr[-3000:]
    last = early.stderr.strip().splitlines()[-1]
    assert "--partition day=2024-01-03: the input" in last and "has no files in this partition (yet)" in last
    assert L.dataset_state(spark, ledger, "events").reservations == []  # refused before the reservation

    _land(spark, table, "2024-01-03")
    landed = _measure(table, tmp_path, ledger, "2024-01-03")  # the same run id, as a retry would
    assert landed.returncode == 0, landed.stderr[-3000:]
    (held,) = L.dataset_state(spark, ledger, "events").reservations
    assert held.partition == {"day": "2024-01-03"} and held.status == "committed"

    _land(spark, table, "2024-01-04")  # another day lands: this day's run is unchanged
    again = _measure(table, tmp_path, ledger, "2024-01-03")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(L.dataset_state(spark, ledger, "events").reservations) == 1  # reused, charged nothing more

    _land(spark, table, "2024-01-03", rows=100)  # late rows of this day: its measurements are stale
    late = _measure(table, tmp_path, ledger, "2024-01-03")
    assert late.returncode == 2, late.stderr[-3000:]
    last = late.stderr.strip().splitlines()[-1]
    assert "input_version: the input's files changed since it was measured; use a new run id" in last, last
    assert len(L.dataset_state(spark, ledger, "events").reservations) == 1
