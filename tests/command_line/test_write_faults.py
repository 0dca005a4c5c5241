"""Write faults through the real CLI: a full disk and a write cut short by kill -9.

- Disk full: a `privsyn-spark measure` subprocess whose runs dir is an 8 KiB tmpfs (mounted in its own
  user and mount namespace with `unshare`, so no root is needed and nothing outlives the process). Spark's
  write of the packed-codes scratch fails with ENOSPC: exit 1, one error line naming the location (it
  used to print a 967-line trace), the reservation refunded (nothing drawn), no artifact.
- A write killed midway: a process killed with SIGKILL inside an atomic write leaves its temporary (0
  bytes). The next run step in that runs dir removes it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from privsyn_spark.errors import EXIT_FAILURE
from tests.command_line.test_bad_input import DATASET, ROOT, Case, _cli, one_error_line

pytestmark = pytest.mark.slow


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def test_a_full_disk_is_one_line_exit_1_and_nothing_charged(spark, tmp_path):
    from privsyn_spark.budget import ledger as L

    if not _unshare_works():  # the only way to a real ENOSPC without root
        pytest.fail("this test needs `unshare -rm` (user and mount namespaces) to mount a small tmpfs")
    case = Case(tmp_path)
    L.set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    small = tmp_path / "small-runs"
    small.mkdir()
    argv = case.argv("--master", "local[2]", step="measure")
    argv[argv.index("--runs-dir") + 1] = str(small)
    mount = 'mount -t tmpfs -o size=8k tmpfs "$0" && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["unshare", "-rm", "sh", "-c", mount, str(small), sys.executable, "-m",
                             "privsyn_spark.cli", *argv], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=600)
    assert result.returncode == EXIT_FAILURE, result.stderr
    line = one_error_line(result.stderr)  # no Python trace, one error line
    assert f"no space left on device writing file:{small}/r1/scratch" in line, line
    assert "retry" in line
    state = L.dataset_state(spark, str(case.ledger), DATASET)
    assert [r.status for r in state.reservations] == ["refunded"] and state.spent_rho == 0.0  # nothing drawn
    assert not (small / "r1").exists()  # the tmpfs went with the process: this is the folder under it


def _write_killed_midway(run_dir: Path) -> Path:
    """A real process claims ``run_dir`` and is killed by SIGKILL inside an atomic write of state.json
    (after the temporary was created, before any byte): what a kill -9 mid-write leaves on disk."""
    script = textwrap.dedent(f"""
        import os, pathlib, signal, socket
        from privsyn_spark.run_artifacts import RunArtifacts

        run_dir = pathlib.Path({str(run_dir)!r})
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / ".owner").write_text(f"{{socket.gethostname()}} {{os.getpid()}}\\n")

        def killed(self, data):
            open(self, "wb").close()
            os.kill(os.getpid(), signal.SIGKILL)

        pathlib.Path.write_bytes = killed
        RunArtifacts({str(run_dir.parent)!r}, {run_dir.name!r}).write_json({{}}, "state.json")
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    orphans = [p for p in run_dir.iterdir() if p.name.startswith(".state.json.") and p.name.endswith(".tmp")]
    assert len(orphans) == 1 and orphans[0].stat().st_size == 0  # the 0-byte orphan
    return orphans[0]


def test_a_write_cut_short_by_kill_9_is_removed_by_the_next_run(spark, capsys, tmp_path):
    case = Case(tmp_path)
    killed = _write_killed_midway(case.runs / "k1")  # another run id, same runs dir
    own = _write_killed_midway(case.runs / "r1")  # this run id's own folder
    code, err = _cli(spark, capsys, case, step="measure")
    assert code == 0, err
    assert not killed.exists() and not own.exists()
    assert (case.runs / "r1" / "measurements" / "measurements.npz").is_file()
    left = [p for p in case.runs.rglob("*.tmp")]
    assert left == [], left


def test_a_full_disk_during_the_table_write_leaves_no_data_file_and_ends_with_the_error(spark, tmp_path):
    """The synthetic table's folder on an 256 KiB tmpfs: the write fails with ENOSPC. What its tasks wrote
    is removed (listed inside the mount namespace, before it goes), and the one error line comes last,
    after Spark's executor traces."""
    from privsyn_spark.budget import ledger as L

    if not _unshare_works():
        pytest.fail("this test needs `unshare -rm` (user and mount namespaces) to mount a small tmpfs")
    case = Case(tmp_path)
    L.set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    small = tmp_path / "small-out"
    small.mkdir()
    argv = case.argv("--master", "local[2]", "--rows", "200000")
    argv[argv.index("--output") + 1] = str(small / "table")
    script = ('mount -t tmpfs -o size=256k tmpfs "$0" && "$@"; code=$?; '
              'echo FILES; find "$0" -type f ! -path "*/_delta_log/*" ! -name ".*"; exit $code')
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script, str(small), sys.executable, "-m",
                             "privsyn_spark.cli", *argv], capture_output=True, text=True, cwd=ROOT, timeout=1200,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == EXIT_FAILURE, result.stderr[-5000:]
    driver = re.sub(r"Traceback \(most recent call last\):\n(  File .*pyspark\.zip.*\n(    .*\n)?)+\S.*\n", "",
                    result.stderr)  # a Python worker's broken pipe as the executors stop: an executor trace
    line = one_error_line(driver)
    assert "no space left on device" in line and str(small) in line, line
    assert result.stderr.rstrip().splitlines()[-1] == line  # last, after the executors' traces
    files = result.stdout.split("FILES", 1)[1].split()
    assert files == [], files  # no part file of the failed write is left in the table's folder
