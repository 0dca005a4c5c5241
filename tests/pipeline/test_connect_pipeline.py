"""The pipeline end to end through a Spark Connect session (no sparkContext, no RDDs, no py4j on the client).

A real Connect server from the pip install (tests/pipeline/connect_server.py, Delta's jars and SQL extension on it, no
Delta Connect plugin): budget set, fit on the bundled Adult sample, sample, one Delta commit, and the ledger's
commit row, each read back by a second engine (delta-rs) where it is a table. The client runs in its own
process (tests/pipeline/connect_client.py): PySpark refuses a remote session beside the suite's classic one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.connect]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    """The URL of a Spark Connect server started for this module; the server is killed at teardown."""
    pytest.importorskip("grpc", reason="the connect extra (grpcio, ...) is not installed")
    from tests.pipeline.connect_server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect-server") / "server.log")
    try:
        server.wait()
        yield server.url
    finally:
        server.stop()


def test_fit_sample_write_over_spark_connect(connect_url, tmp_path):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "tests.pipeline.connect_client", connect_url, str(tmp_path)],
                          cwd=root, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-6000:])
    assert "connect client: all checks passed" in done.stdout
