"""A Spark Connect server (loopback, local[2]) for the module's tests, and a remote session on it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory):
    """A Spark Connect session on a server started for this module; the server is killed at teardown."""
    pytest.importorskip("grpc", reason="the connect extra (grpcio, ...) is not installed")
    from pyspark.sql import SparkSession

    from tests.connect.server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect-server") / "server.log")
    try:
        server.wait()
        session = SparkSession.builder.remote(server.url).getOrCreate()
        try:
            yield session
        finally:
            session.stop()  # also ends this process's Connect mode (SPARK_CONNECT_MODE_ENABLED)
    finally:
        server.stop()
