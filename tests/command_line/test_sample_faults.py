"""Faults of `privsyn-spark sample --from-run` through the real CLI, on one run fitted without a ledger.

Two samples of one run at once each keep and delete only their own GUM checkpoints; a truncated
``targets/targets.npz`` is re-estimated from the measurements (with a warning), never a block; a
``measurements.npz`` whose counts were scaled in place is refused by its own checksum.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from privsyn_spark.errors import EXIT_USAGE
from tests.command_line.test_bad_input import ROOT, Case, one_error_line, people, write_parquet

pytestmark = pytest.mark.slow


def _popen(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "privsyn_spark.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Case:
    """One `run --no-ledger` (run id r1) whose run folder the tests copy."""
    case = Case(tmp_path_factory.mktemp("fitted"))
    write_parquet(people(5_000), case.input)
    argv = [a for a in case.argv("--master", "local[2]", "--no-ledger")
            if a not in ("--ledger", str(case.ledger), "--dataset-id", "people")]
    code, err = _finish(_popen(argv))
    assert code == 0, err
    assert (case.runs / "r1" / "targets" / "targets.npz").is_file()
    return case


def _sample(fitted: Case, runs: Path, output: Path, *extra: str) -> list[str]:
    return ["sample", "--from-run", "r1", "--schema", str(fitted.schema), "--runs-dir", str(runs),
            "--output", str(output), "--master", "local[2]", "--seed", "3", *extra]


def _runs(fitted: Case, tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(fitted.runs, runs)
    return runs


def test_two_samples_of_one_run_at_once_keep_their_own_checkpoints(fitted, tmp_path):
    runs = _runs(fitted, tmp_path)
    long_config = tmp_path / "long.yaml"  # several rounds on many shards: it checkpoints for a while
    long_config.write_text(yaml.safe_dump({"sharding": {"gum_rounds": 12, "shard_rows": 500, "model_min_gain": 0}}))
    # paused (SIGSTOP) while the quick one runs, so its Spark must not time out its own executor meanwhile
    slow = _popen(_sample(fitted, runs, tmp_path / "slow", "--rows", "20000", "--config", str(long_config),
                          "--conf", "spark.network.timeout=900s"))
    checkpoints = runs / "r1" / "checkpoints"
    end = time.monotonic() + 600
    while not any(checkpoints.rglob("rdd-*")):  # the slow one is synthesizing
        assert slow.poll() is None, slow.communicate()[1]
        assert time.monotonic() < end, "the sample never checkpointed"
        time.sleep(0.2)
    os.killpg(slow.pid, signal.SIGSTOP)  # mid-synthesis until the quick one is done: alive, its checkpoints kept
    try:
        mine = {p.relative_to(checkpoints).parts[0] for p in checkpoints.rglob("rdd-*")}
        quick, quick_err = _finish(_popen(_sample(fitted, runs, tmp_path / "quick", "--rows", "300")))
        assert quick == 0, quick_err
        assert checkpoints.is_dir() and {p.name for p in checkpoints.iterdir()} == mine  # the quick one's only gone
        assert slow.poll() is None, "the slow sample ended before the quick one: the test proves nothing"
    finally:
        os.killpg(slow.pid, signal.SIGCONT)
    code, err = _finish(slow)
    assert code == 0 and "Traceback" not in err, err
    assert not checkpoints.exists()  # the last one out removes the run's checkpoints folder


def test_a_truncated_targets_file_is_re_estimated_with_a_warning(fitted, tmp_path):
    runs = _runs(fitted, tmp_path)
    targets = runs / "r1" / "targets" / "targets.npz"
    targets.write_bytes(targets.read_bytes()[:200])
    code, err = _finish(_popen(_sample(fitted, runs, tmp_path / "first", "--rows", "300")))
    assert code == 0, err
    assert "targets.npz cannot be read" in err and "re-estimating" in err
    code, err = _finish(_popen(_sample(fitted, runs, tmp_path / "again", "--rows", "300")))
    assert code == 0 and "cannot be read" not in err, err  # the rewritten targets serve the next sample


def test_measurements_with_counts_scaled_in_place_are_refused_by_their_checksum(fitted, tmp_path):
    runs = _runs(fitted, tmp_path)
    artifact = runs / "r1" / "measurements" / "measurements.npz"
    with np.load(io.BytesIO(artifact.read_bytes())) as npz:
        entries = {name: npz[name] for name in npz.files}
    entries = {name: a * 10 if name.startswith("marginal_") else a for name, a in entries.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **entries)  # a naive edit: every entry kept, the counts x10
    artifact.write_bytes(buffer.getvalue())
    code, err = _finish(_popen(_sample(fitted, runs, tmp_path / "out", "--rows", "300")))
    assert code == EXIT_USAGE, err
    assert "does not match its checksum" in one_error_line(err)
    assert not (tmp_path / "out").exists()
