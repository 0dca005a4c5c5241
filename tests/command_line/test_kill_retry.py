"""Fault test: a run killed with kill -9 after its reservation, before any noise,
costs one charge in all.

A real `privsyn-spark measure` subprocess holds the dataset's reservation and has counted the table; the
test hook ``PRIVSYN_TEST_PAUSE_BEFORE_DRAW`` (``release_guard``: inert unless set) stops it at the last
moment it provably drew nothing (before its ledger ``drawn`` record). The test kills its whole process
group (driver and Spark JVM) with SIGKILL. The retry, a second subprocess without the hook, exits 0: it
takes the reservation over (refunded), charges its own, and the dataset's spent rho is one run's. A
first attempt still alive when a second takes its reservation over stops at its first draw, in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privsyn_spark.release.guard import PAUSE_BEFORE_DRAW_ENV
from tests.command_line.test_bad_input import DATASET, ROOT, Case, one_error_line

pytestmark = pytest.mark.slow


def _measure(case: Case, env_extra: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    return subprocess.Popen([sys.executable, "-m", "privsyn_spark.cli", *case.argv("--master", "local[2]",
                                                                                     step="measure")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)


def _wait_for(proc: subprocess.Popen, marker: Path, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < end, "the run never reached the point before its first noise draw"
        time.sleep(0.2)


def test_kill_9_between_reservation_and_noise_then_a_retry_charges_once(spark, tmp_path):
    from privsyn_spark.budget import ledger as L
    from privsyn_spark.privacy.accounting import rho_from_eps_delta
    from privsyn_spark.privacy.measurements import Measurements

    case = Case(tmp_path)
    L.set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    marker = tmp_path / "paused"
    proc = _measure(case, {PAUSE_BEFORE_DRAW_ENV: str(marker)})
    try:
        _wait_for(proc, marker)
        held = L.dataset_state(spark, str(case.ledger), DATASET).reservations
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole task: driver and its Spark JVM
        proc.communicate(timeout=60)
    assert [(r.status, r.drawn) for r in held] == [("uncommitted", False)]  # reserved, counted, no noise yet
    dead_attempt = held[0].attempt
    assert proc.returncode == -signal.SIGKILL
    assert not (case.runs / "r1" / "measurements" / "measurements.npz").exists()

    retry = _measure(case, {})
    _, err = retry.communicate(timeout=600)
    assert retry.returncode == 0, err
    assert "Traceback" not in err and "privsyn-spark: error:" not in err
    state = L.dataset_state(spark, str(case.ledger), DATASET)
    assert [(r.attempt == dead_attempt, r.status) for r in state.reservations] == [(True, "refunded"),
                                                                                 (False, "committed")]
    rho = rho_from_eps_delta(1.0, 1e-9)
    assert state.spent_rho == pytest.approx(rho) and state.reservations[1].drawn  # charged exactly once
    artifact = Measurements.from_bytes((case.runs / "r1" / "measurements" / "measurements.npz").read_bytes())
    assert artifact.provenance["attempt"] == state.reservations[1].attempt

    again = _measure(case, {})  # a later retry reuses the committed measurements: nothing more charged
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert L.dataset_state(spark, str(case.ledger), DATASET).spent_rho == pytest.approx(rho)


def test_the_hook_is_inert_when_unset(monkeypatch):
    """Production never sets the variable: the sampler draws at once, no file, no pause."""
    import numpy as np

    from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
    from privsyn_spark.release.guard import TrackingSampler

    monkeypatch.delenv(PAUSE_BEFORE_DRAW_ENV, raising=False)
    calls: list[int] = []
    sampler = TrackingSampler(SeededSamplerForTestsOnly(0), lambda: calls.append(1))
    start = time.monotonic()
    assert isinstance(sampler.discrete_gaussian(1.0, 3), np.ndarray) and calls == [1]
    assert time.monotonic() - start < 5


def test_a_live_attempt_taken_over_stops_in_one_line_and_the_warning_does_not_call_it_stopped(spark, tmp_path):
    """A second process takes over the reservation of a first that is still alive, paused before its first
    draw: its warning does not claim the first stopped; the first, let go, ends with one line, no noise."""
    from privsyn_spark.budget import ledger as L
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    case = Case(tmp_path)
    L.set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    marker = tmp_path / "paused"
    first = _measure(case, {PAUSE_BEFORE_DRAW_ENV: str(marker)})
    try:
        _wait_for(first, marker)
        second = _measure(case, {})
        _, second_err = second.communicate(timeout=600)
        assert second.returncode == 0, second_err
        assert "stopped before any noise" not in second_err and "is still reading" in second_err
        marker.unlink()  # the first attempt goes on to its first draw
        _, first_err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == 1, first_err
    assert "took its reservation over while this one was still reading" in one_error_line(first_err)
    state = L.dataset_state(spark, str(case.ledger), DATASET)
    assert [r.status for r in state.reservations] == ["refunded", "committed"]
    assert state.spent_rho == pytest.approx(rho_from_eps_delta(1.0, 1e-9))  # one charge, one draw
