"""The command line on Spark Connect: ``$SPARK_REMOTE`` (or ``--remote``) runs every command through a remote
session instead of a master (a real Connect server on 127.0.0.1, the CLI in subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from privsyn_spark.errors import EXIT_USAGE
from tests.command_line.test_bad_input import DATASET, ROOT, Case, one_error_line

pytestmark = [pytest.mark.slow, pytest.mark.connect]


def _cli(case: Case, argv: list[str], remote: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_REMOTE", None)
    if remote:
        env["SPARK_REMOTE"] = remote
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=case.dir, timeout=900)


def test_spark_remote_runs_budget_and_run_on_a_connect_server(tmp_path):
    pytest.importorskip("grpc", reason="the connect extra (grpcio, ...) is not installed")
    from tests.pipeline.connect_server import ConnectServer

    case = Case(tmp_path)
    refused = _cli(case, ["budget", "show", "--ledger", str(case.ledger), "--master", "local[2]"], "sc://127.0.0.1:1")
    assert refused.returncode == EXIT_USAGE and "--master local[2] cannot be set" in one_error_line(refused.stderr)

    server = ConnectServer(tmp_path / "server.log")
    try:
        server.wait()
        budget = _cli(case, ["budget", "set", "--ledger", str(case.ledger), "--dataset-id", DATASET,
                             "--epsilon", "10", "--delta", "1e-9"], server.url)
        assert budget.returncode == 0, budget.stderr[-4000:]
        run = _cli(case, case.argv(), server.url)
        assert run.returncode == 0, run.stderr[-6000:]
        assert "CANNOT_CONFIGURE_SPARK_CONNECT_MASTER" not in run.stderr
        assert run.stdout.startswith("privsyn-spark: run done: wrote ") and f"(dataset '{DATASET}')" in run.stdout
        show = _cli(case, ["budget", "show", "--ledger", str(case.ledger), "--remote", server.url], None)
        assert show.returncode == 0, show.stderr[-4000:]  # a local path ledger: read without a session
        assert f"dataset '{DATASET}'" in show.stdout
    finally:
        server.stop()
    assert case.table_written()
