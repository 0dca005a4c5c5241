"""A schema of 2,000 columns (1,999,000 attribute pairs) through the real CLI: `plan` and `run` refuse it
from its width in one line, before Spark starts and before any budget; with the limit raised in
--config, `plan` plans it (bench/bench_width.py times both)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from privsyn_spark import PrivSyn
from privsyn_spark.errors import UsageError
from privsyn_spark.sample.generator import generated_schema

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 2000
REFUSAL = "the schema's 2,000 attributes make 1,999,000 attribute pairs, above the limit of 125,000"


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    schema = tmp_path / "wide.yaml"
    schema.write_text(yaml.safe_dump(generated_schema([2] * WIDTH)))
    return schema


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("privsyn-spark: error:")]


def test_plan_and_run_refuse_a_schema_too_wide_before_spark(wide, tmp_path):
    planned = cli("plan", "--schema", str(wide), "--epsilon", "1", "--no-ledger", cwd=tmp_path)
    assert planned.returncode == 2, planned.stderr
    assert [REFUSAL in line for line in error_lines(planned.stderr)] == [True]
    assert "max_attribute_pairs" in planned.stderr

    data = tmp_path / "wide.csv"
    data.write_text(",".join(f"x{j}" for j in range(WIDTH)) + "\n" + ",".join("0" * WIDTH) + "\n")
    ran = cli("run", "--input", str(data), "--schema", str(wide), "--output", str(tmp_path / "out"),
              "--epsilon", "1", "--no-ledger", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert [REFUSAL in line for line in error_lines(ran.stderr)] == [True]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()  # refused before any run folder
    assert "SparkContext" not in ran.stderr and "spark-warehouse" not in os.listdir(tmp_path)


def test_plan_plans_the_wide_schema_with_the_limit_raised(wide, tmp_path):
    config = tmp_path / "wide_settings.yaml"
    config.write_text("selection: {max_attribute_pairs: 2000000}\n")
    planned = cli("plan", "--schema", str(wide), "--epsilon", "1", "--no-ledger", "--config", str(config),
                  cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    indif = [line for line in planned.stdout.splitlines() if line.startswith("indif (all pairs")]
    assert len(indif) == 1 and indif[0].endswith("1,999,000")
    assert "first engine pass: 31,984,000 cells" in planned.stdout  # 1,999,000 pairs of 4 x 4 codes


def test_the_api_refuses_the_width_before_reading(wide):
    synth = PrivSyn(str(wide), no_ledger=True)
    with pytest.raises(UsageError, match="1,999,000 attribute pairs"):
        synth.plan()
    with pytest.raises(UsageError, match="1,999,000 attribute pairs"):
        synth.measure("no/such/table.csv")  # refused before the input is looked at (no Spark)
