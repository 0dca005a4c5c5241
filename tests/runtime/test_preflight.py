"""fit's preflight on a caller's own session: one line with the fix before anything is read or charged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.runtime import preflight
from tests.jobs.conftest import base_env

PROBE = Path(__file__).with_name("preflight_probe.py")


def test_workers_that_import_the_package_pass_once_per_session(spark, monkeypatch):
    preflight._CHECKED.discard(id(spark))
    preflight.preflight(spark, needs_delta="the budget ledger x")  # the fixture's session has Delta
    assert id(spark) in preflight._CHECKED
    monkeypatch.setattr(spark, "range", None)  # a second check runs no job
    preflight.check_workers(spark)


@pytest.mark.slow
def test_a_session_without_delta_or_without_the_package_on_its_workers_is_refused_in_one_line(tmp_path):
    """fit, and every other entry point that needs Delta (set_budget, budget_states, write_delta)."""
    hide = tmp_path / "hide_privsyn.py"  # the workers' Python: this venv's, with privsyn_spark unimportable
    hide.write_text("import runpy, sys\nsys.modules['privsyn_spark'] = None\nsys.argv = sys.argv[2:]\n"
                    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")
    wrapper = tmp_path / "python-without-privsyn"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = "-m" ] || exec {sys.executable} "$@"\n'
                       f'exec {sys.executable} {hide} "$@"\n')
    wrapper.chmod(0o755)
    runs = tmp_path / "runs"
    out = subprocess.run([sys.executable, str(PROBE), str(runs)], capture_output=True, text=True, timeout=600,
                         env=base_env(PYSPARK_PYTHON=str(wrapper), PYTHONPATH=str(PROBE.parents[2])))
    assert out.returncode == 0, out.stderr[-3000:]
    errors = json.loads(out.stdout.strip().splitlines()[-1])
    assert "has no Delta Lake" in errors["with_ledger"] and "when the session is created" in errors["with_ledger"]
    assert errors["no_ledger"].startswith("the Spark session's Python workers cannot import privsyn_spark")
    assert "PYSPARK_PYTHON" in errors["no_ledger"] and "addPyFile" in errors["no_ledger"]
    for entry_point in ("set_budget", "budget_states", "write_delta"):  # the same preflight, the same line
        assert "has no Delta Lake" in errors[entry_point] and "when the session is created" in errors[entry_point]
    assert all("\n" not in e for e in errors.values())
    assert not (runs / "ledger").exists() and not list(runs.glob("*/measurements*"))  # nothing read, nothing charged
