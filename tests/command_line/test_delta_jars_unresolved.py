"""Without setup.sh's cache of the Delta jars, Spark resolves them with Ivy (spark.jars.packages); when that
fails (here: a Maven repository on a closed loopback port, an empty Ivy home) the CLI (`budget set`: a
command that starts Spark; `budget show` of a local path reads it without) ends with one line
saying what to do, not PySpark's JAVA_GATEWAY_EXITED trace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.errors import EXIT_FAILURE

ROOT = Path(__file__).resolve().parents[2]
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="nowhere"/>
  <resolvers><ibiblio name="nowhere" m2compatible="true" root="http://127.0.0.1:9/maven2/"/></resolvers>
</ivysettings>
"""


@pytest.mark.slow
def test_an_ivy_failure_is_one_line_with_the_fix(tmp_path):
    (tmp_path / "jars").mkdir()
    (tmp_path / "ivysettings.xml").write_text(IVY_SETTINGS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRIVSYN_SPARK_JARS_DIR": str(tmp_path / "jars")}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    result = subprocess.run(
        [sys.executable, "-m", "privsyn_spark.cli", "budget", "set", "--ledger", str(tmp_path / "ledger"),
         "--dataset-id", "d", "--epsilon", "1", "--delta", "1e-9",
         "--master", "local[1]", "--conf", f"spark.jars.ivy={tmp_path / 'ivy'}",
         "--conf", f"spark.jars.ivySettings={tmp_path / 'ivysettings.xml'}"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == EXIT_FAILURE, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("privsyn-spark: error:")]
    assert len(lines) == 1, result.stderr
    assert "resolving the Delta jars io.delta:delta-spark_" in lines[0]
    assert f"`privsyn-spark jars --fetch [--repositories <a Maven mirror you can reach>]` caches them in " \
           f"{tmp_path / 'jars'}" in lines[0]
    assert "spark.jars.repositories" in lines[0]
