"""The budget ledger through the real CLI: a local ledger and a local table's provenance are read without
starting Spark, a damaged ledger is one line and exit 3 at once, a read-only ledger is refused before
Spark starts, as a read-only output is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.errors import EXIT_BUDGET, EXIT_USAGE
from tests.command_line.test_bad_input import DATASET, ROOT, Case, one_error_line
from tests.command_line.test_write_faults import _unshare_works

pytestmark = pytest.mark.slow

NO_JVM = {"SPARK_HOME": "/nonexistent-spark", "JAVA_HOME": "/nonexistent-java"}
"""An environment in which no Spark JVM can start: a command that succeeds there started none."""


def cli(*argv: str, wrap: tuple[str, ...] | list[str] = (), **env: str) -> subprocess.CompletedProcess:
    """``privsyn-spark ARGV`` in a child process running this checkout (``wrap``: a command line before it)."""
    return subprocess.run([*wrap, sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT, timeout=900)


def test_budget_show_check_and_provenance_of_local_paths_start_no_spark(spark, tmp_path):
    from privsyn_spark import api
    from privsyn_spark.budget import ledger as L

    ledger, out = str(tmp_path / "ledger"), str(tmp_path / "out")
    L.set_budget(spark, ledger, DATASET, 3.0, 1e-9)
    held = L.reserve(spark, ledger, DATASET, "r1", rho=0.06, epsilon=1.0, delta=1e-9, fingerprint={}, artifact="m")
    L.commit(spark, ledger, held, "m", "sha")
    api.write_delta(spark.createDataFrame([(1, "a")], "x int, y string"), out,
                    provenance={"privsyn.run_id": "r1", "privsyn.epsilon": "1.0"})

    refused = cli("budget", "set", "--ledger", ledger, "--dataset-id", "other", "--epsilon", "1", "--delta", "1e-9",
                  **NO_JVM)
    assert refused.returncode != 0  # the environment does keep Spark from starting
    show = cli("budget", "show", "--ledger", ledger, "--epsilon", "1", **NO_JVM)
    assert show.returncode == 0, show.stderr
    assert f"dataset {DATASET!r}" in show.stdout and "#2 run 'r1'" in show.stdout and "committed" in show.stdout
    assert "more run(s) fit at epsilon=1" in show.stdout
    check = cli("budget", "check", "--ledger", ledger, "--dataset-id", DATASET, "--epsilon", "1", "--run-id", "r2",
                **NO_JVM)
    assert check.returncode == 0, check.stderr
    assert f"dataset {DATASET!r}: run 'r2' fits" in check.stdout
    history = cli("provenance", out, **NO_JVM)
    assert history.returncode == 0, history.stderr
    assert "run=r1" in history.stdout and "epsilon=1.0" in history.stdout
    missing = cli("budget", "show", "--ledger", str(tmp_path / "typo"), **NO_JVM)
    assert missing.returncode == EXIT_BUDGET and "no budget ledger at" in one_error_line(missing.stderr)


def test_a_damaged_ledger_is_one_line_and_exit_3_at_once(spark, tmp_path):
    from privsyn_spark.budget import ledger as L

    folder = tmp_path / "ledger"
    L.set_budget(spark, str(folder), DATASET, 5.0, 1e-9)  # versions 0 and 1
    for i in range(3):  # versions 2-4
        L.record_nonprivate(spark, str(folder), "other", f"r{i}", "test")
    for version in (2, 3):
        (folder / "_delta_log" / f"{version:020d}.json").unlink()
    for argv in (["budget", "show", "--ledger", str(folder)],  # read without Spark
                 ["budget", "set", "--ledger", str(folder), "--dataset-id", DATASET, "--epsilon", "5", "--delta",
                  "1e-9"]):  # with Spark: it once waited 2 minutes on "concurrent creation", then a trace
        done = cli(*argv)
        assert done.returncode == EXIT_BUDGET, done.stderr[-3000:]
        line = one_error_line(done.stderr)
        assert f"the ledger at {folder} is damaged (versions 2-3 missing): restore it" in line, line
        assert "no budget ledger" not in line


def test_a_read_only_ledger_is_refused_before_spark_in_one_line(spark, tmp_path):
    from privsyn_spark.budget import ledger as L

    if not _unshare_works():  # a read-only mount without root
        pytest.fail("this test needs `unshare -rm` (user and mount namespaces) to mount a folder read-only")
    case = Case(tmp_path)
    L.set_budget(spark, str(case.ledger), DATASET, 5.0, 1e-9)
    read_only = ["unshare", "-rm", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
                 str(case.ledger)]
    for argv in (["budget", "set", "--ledger", str(case.ledger), "--dataset-id", "other", "--epsilon", "1", "--delta",
                  "1e-9"], case.argv("--master", "local[1]")):
        done = cli(*argv, wrap=read_only, **NO_JVM)
        assert done.returncode == EXIT_USAGE, done.stderr[-3000:]
        line = one_error_line(done.stderr)
        assert f"--ledger {case.ledger}: cannot write in {case.ledger}" in line and "Read-only" in line, line
    new = Path("/proc/privsyn-ledger-check/ledger")  # a ledger to create where nothing can be written
    done = cli("budget", "set", "--ledger", str(new), "--dataset-id", "d", "--epsilon", "1", "--delta", "1e-9",
               **NO_JVM)
    assert done.returncode == EXIT_USAGE and "cannot write in /proc" in one_error_line(done.stderr)
    assert L.dataset_state(spark, str(case.ledger), "other").budget is None and not case.table_written()
