"""Removing a run folder's scratch keeps the checkpoint folders of processes that may still use them
(two samples of one run at once: each owns ``checkpoints/<host>-<pid>-<random>``); a stop signal is not
an error a broad ``except Exception`` can take and carry on from."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from privsyn_spark.runtime.stale_scratch import remove_scratch


def test_checkpoints_of_a_live_process_are_kept_and_a_dead_ones_removed(tmp_path):
    host = socket.gethostname()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    checkpoints = tmp_path / "checkpoints"
    try:
        for name in (f"{host}-{live.pid}-aa", f"{host}-{dead.pid}-bb", "stray"):
            (checkpoints / name).mkdir(parents=True)
        (tmp_path / "scratch").mkdir()
        assert remove_scratch(tmp_path)
        assert [p.name for p in checkpoints.iterdir()] == [f"{host}-{live.pid}-aa"]
        assert not (tmp_path / "scratch").exists()
    finally:
        live.kill()
        live.wait()
    assert remove_scratch(tmp_path) and not checkpoints.exists()  # its process gone: removed too


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_passes_through_except_exception_and_ends_as_terminated(name):
    script = textwrap.dedent(f"""
        import os, signal
        from privsyn_spark.runtime.stale_scratch import StopSignal, install_stop_handlers
        install_stop_handlers()
        try:
            try:
                os.kill(os.getpid(), signal.{name})
                for _ in range(10 ** 6):  # the handler runs between two bytecodes of this loop
                    pass
                print("not stopped")
            except Exception:
                print("swallowed")
        except StopSignal as stop:
            print(stop.error.exit_code, stop.error)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    code = {"SIGTERM": 143, "SIGINT": 130}[name]
    assert out.startswith(f"{code} terminated by {name}: the run stopped"), out
