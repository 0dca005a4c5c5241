"""`privsyn-spark run` of a people schema: persons to --persons-output, their rows to --output, --people N."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from privsyn_spark.errors import EXIT_USAGE
from tests.command_line.test_bad_input import one_error_line
from tests.people_tables import keyed_table, people_doc

ROOT = Path(__file__).resolve().parents[2]


def cli(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)


def inputs(tmp_path: Path) -> list[str]:
    keyed_table(50, seed=6).to_csv(tmp_path / "orders.csv", index=False)
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(people_doc()))
    return ["run", "--input", str(tmp_path / "orders.csv"), "--schema", str(tmp_path / "schema.yaml"),
            "--epsilon", "8", "--no-ledger", "--runs-dir", str(tmp_path / "runs"), "--master", "local[2]"]



def written_people(spark: Any, folder: Path, result: Any, people: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The persons and rows a successful people `run` wrote to ``folder``/persons and /rows (checked: the run
    said so, no real id on its streams, ``people`` persons, every row's key one of theirs)."""
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote synthetic persons to" in result.stdout
    assert "REALID" not in result.stdout + result.stderr
    for phase in ("measure: reading the keyed input once and encoding its person table: done in",
                  "measure: encoding the row table (K rows per person): done in",
                  "synthesize: dealing the persons their rows, writing both tables: done in"):
        assert phase in result.stderr  # progress on the long steps
    persons = spark.read.format("delta").load(str(folder / "persons")).toPandas()  # synthetic tables
    rows = spark.read.format("delta").load(str(folder / "rows")).toPandas()
    assert len(persons) == people and set(rows.customer_id) <= set(persons.customer_id)
    assert list(rows.columns) == ["customer_id", "segment", "region", "channel", "amount"]
    return persons, rows


@pytest.mark.slow
def test_run_writes_persons_and_their_rows(spark, tmp_path):
    argv = inputs(tmp_path) + ["--output", str(tmp_path / "rows"), "--persons-output", str(tmp_path / "persons"),
                               "--people", "15", "-v"]
    written_people(spark, tmp_path, cli(argv), 15)


def test_run_without_persons_output_is_one_line_before_any_budget(tmp_path):
    result = cli(inputs(tmp_path) + ["--output", str(tmp_path / "rows")])
    assert result.returncode == EXIT_USAGE
    assert "--persons-output" in one_error_line(result.stderr)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("measurements.npz"))
