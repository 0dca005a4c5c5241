"""Fault tests: a run stopped by SIGTERM, SIGINT or SIGKILL leaves no private-row scratch behind.

Real `privsyn-spark run` subprocesses on a small Parquet table: SIGTERM (or Ctrl-C's SIGINT) while the
scratch table of packed codes exists ends the run with exit 143 (130) and one error line, and the
scratch is gone; after SIGKILL the scratch stays until the next run in that runs dir starts, which removes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privsyn_spark.runtime.stale_scratch import EXIT_TERMINATED
from tests.command_line.test_bad_input import ROOT, Case, one_error_line, people, write_parquet

pytestmark = pytest.mark.slow


def _start(case: Case, run_id: str) -> subprocess.Popen:
    argv = case.argv("--master", "local[2]", "--no-ledger")
    argv = [a for a in argv if a not in ("--ledger", str(case.ledger), "--dataset-id", "people")]
    argv[argv.index("--run-id") + 1] = run_id
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "privsyn_spark.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)


def _wait_for_scratch(proc: subprocess.Popen, scratch: Path, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while not (scratch / "_SUCCESS").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < end, "the run never wrote its scratch table"
        time.sleep(0.2)


def _case(tmp_path: Path) -> Case:
    case = Case(tmp_path)
    write_parquet(people(20_000), case.input)
    return case


@pytest.mark.parametrize("signum, exit_code", [(signal.SIGTERM, EXIT_TERMINATED), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_removes_the_scratch_and_exits_128_plus_it_in_one_line(tmp_path, signum, exit_code):
    case = _case(tmp_path)
    proc = _start(case, "t1")
    scratch = case.runs / "t1" / "scratch"
    _wait_for_scratch(proc, scratch)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # Ctrl-C reaches the whole foreground group (Spark's JVM ignores it)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == exit_code, err
    assert f"terminated by {signum.name}" in one_error_line(err)
    assert not scratch.exists() and not (case.runs / "t1" / "checkpoints").exists()
    assert not (case.runs / "t1" / ".owner").exists() and not case.table_written()


def test_scratch_left_by_sigkill_is_removed_by_the_next_run_in_the_runs_dir(tmp_path):
    case = _case(tmp_path)
    proc = _start(case, "k1")
    scratch = case.runs / "k1" / "scratch"
    _wait_for_scratch(proc, scratch)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole task: driver and its Spark JVM
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and scratch.is_dir()  # what kill -9 leaves
    nxt = _start(case, "k2")  # another run id, same runs dir
    end = time.monotonic() + 300
    while scratch.exists():
        assert time.monotonic() < end, "the next run did not remove the stale scratch"
        time.sleep(0.2)
    assert (case.runs / "k2" / ".owner").read_text().split()[1] == str(nxt.pid)  # its own folder is claimed
    os.killpg(nxt.pid, signal.SIGTERM)
    nxt.communicate(timeout=300)
