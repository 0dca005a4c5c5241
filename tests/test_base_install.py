"""`pip install privsyn-spark[spark]` (Spark, no other extra) runs the whole pipeline with --no-evaluate,
in a fresh venv (the base install without Spark: tests/test_platform_pyspark.py)."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def test_the_base_package_alone_runs_the_pipeline(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                                                           "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", SPARK_LOCAL_IP="127.0.0.1")
    # the wheel built from this checkout, at the versions CI pins (pip reuses its caches)
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "-c", str(REPO / "constraints.txt"), f"{REPO}[spark]"],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1200)
    assert install.returncode == 0, install.stderr[-3000:]
    for extra_only in ("matplotlib", "sklearn", "airflow"):
        probe = subprocess.run([str(python), "-c", f"import {extra_only}"], capture_output=True, env=env)
        assert probe.returncode != 0, f"{extra_only} is installed by the base package"

    sample = tmp_path / "adult_head.csv"
    with gzip.open(REPO / "privsyn_spark" / "sample" / "adult.csv.gz", "rt") as src:
        sample.write_text("".join(line for _, line in zip(range(3001), src)))
    run = subprocess.run([str(venv / "bin" / "privsyn-spark"), "run", "--input", str(sample),
                          "--schema", str(REPO / "privsyn_spark" / "sample" / "adult.schema.yaml"),
                          "--output", str(tmp_path / "out"), "--run-id", "base", "--runs-dir", str(tmp_path / "runs"),
                          "--epsilon", "1", "--no-evaluate", "--no-ledger", "--master", "local[1]",
                          "--gum-rounds", "2", "-v"],  # -v: the INFO line naming the counting backend
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "(jvm backend)" in run.stderr  # the counter jar came with the wheel
    assert (tmp_path / "out" / "_delta_log" / "00000000000000000000.json").exists()
    report = (tmp_path / "runs" / "base" / "operator" / "report.html").read_text()
    assert "they need matplotlib" in report and "privsyn-spark[report]" in report
