"""Removing a run folder's scratch keeps the checkpoint folders of processes that may still use them
(two samples of one run at once: each owns ``checkpoints/<host>-<pid>-<random>``)."""

from __future__ import annotations

import socket
import subprocess
import sys

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
