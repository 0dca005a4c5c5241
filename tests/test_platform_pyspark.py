"""Packaging for managed platforms: ``pip install privsyn-spark`` leaves the platform's PySpark alone.

A fresh plain venv (no system site packages) stands in for a platform whose PySpark is another supported
version than CI's: ``pyspark-client`` 4.1.1, the Connect-only PySpark (2 MB, the ``pyspark`` module of a
Databricks serverless client; a full pyspark 4.1 is a 450 MB download). Installing the base package
(no extra) from this checkout must not replace it: the base does not depend on pyspark, only the
``[spark]`` extra does. Without any PySpark, the first entry point that needs Spark says so in one line.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLATFORM_PYSPARK = "4.1.1"

pytestmark = pytest.mark.slow


def test_the_base_install_leaves_a_preinstalled_pyspark_alone(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                                                           "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    def run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)

    def pip(*argv: str) -> None:
        done = run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *argv)
        assert done.returncode == 0, done.stderr[-3000:]

    def pyspark_version() -> str:
        done = run(python, "-c", "import pyspark; print(pyspark.__version__)")
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    pip("--no-deps", f"pyspark-client=={PLATFORM_PYSPARK}")  # the platform's PySpark, there first
    assert pyspark_version() == PLATFORM_PYSPARK
    pip("-c", str(REPO / "constraints.txt"), str(REPO))  # the base package: its own dependencies only
    assert pyspark_version() == PLATFORM_PYSPARK  # untouched
    shown = run(python, "-m", "pip", "list", "--format=freeze")
    installed = dict(line.split("==", 1) for line in shown.stdout.splitlines() if "==" in line)
    assert installed.get("pyspark-client") == PLATFORM_PYSPARK and "pyspark" not in installed
    assert "delta-spark" not in installed
    probe = run(python, "-c", "import privsyn_spark; from privsyn_spark.runtime.pyspark_check import check_pyspark; "
                              "print(check_pyspark())")
    assert probe.returncode == 0 and probe.stdout.strip() == PLATFORM_PYSPARK, probe.stderr[-2000:]

    # no PySpark at all: the package imports; the first step that needs Spark says how to fix it, in one line
    assert run(python, "-m", "pip", "uninstall", "-q", "-y", "pyspark-client").returncode == 0
    assert run(python, "-c", "import privsyn_spark").returncode == 0
    done = run(str(venv / "bin" / "privsyn-spark"), "budget", "show", "--ledger", str(tmp_path / "ledger"))
    errors = [line for line in done.stderr.splitlines() if line.startswith("privsyn-spark: error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "privsyn-spark needs PySpark and none is installed: install privsyn-spark[spark]" in errors[0]


def test_a_wheel_is_not_built_without_the_counter_jar(tmp_path):
    """A clean clone has no counter jar (it is built by scripts/setup.sh): the build stops and says so."""
    clone = tmp_path / "clone"
    clone.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(clone)], input=archive.stdout, check=True)
    assert not (clone / "privsyn_spark" / "measure" / "jvm" / "privsyn-spark-counter.jar").exists()
    env = {k: v for k, v in os.environ.items() if k != "PRIVSYN_BUILD_WITHOUT_JAR"}
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w",
             str(tmp_path / "wheels"), str(clone)]
    done = subprocess.run(build, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode != 0
    assert "privsyn-spark build: privsyn_spark/measure/jvm/privsyn-spark-counter.jar is missing: run " \
           "scripts/setup.sh" in done.stdout + done.stderr
    assert not list((tmp_path / "wheels").glob("*.whl"))
