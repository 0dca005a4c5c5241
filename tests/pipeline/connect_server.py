"""A Spark Connect server from the pip install, on 127.0.0.1 (tests only; docs/operations.md#spark-connect).

pyspark ships the server jar but no start script: ``spark-submit --class ...SparkConnectServer`` starts it
(~10 s). The Delta jars (``scripts/setup.sh`` puts them in ~/.cache/privsyn-spark/jars) and Delta's SQL
extension go on the server; its Python workers run this interpreter, which imports the package.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class ConnectServer:
    """A local Spark Connect server process (``local[2]``, loopback only); ``stop()`` kills it by its pid."""

    def __init__(self, log_file: Path, driver_memory: str = "2g") -> None:
        from privsyn_spark.runtime.session import DELTA_CATALOG, DELTA_EXTENSION, jars_dir

        home = Path(pyspark.__file__).parent
        jars = sorted(str(j) for j in jars_dir().glob("*.jar"))
        if not any("delta-spark_" in j for j in jars):
            raise RuntimeError(f"no Delta jars in {jars_dir()}: run scripts/setup.sh first")
        self.port = free_port()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable}
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        env.pop("SPARK_REMOTE", None)
        command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]",
                   "--driver-memory", driver_memory, "--jars", ",".join(jars),
                   "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                   "--conf", f"spark.connect.grpc.binding.port={self.port}",
                   "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
                   "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
                   "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
                   "spark-internal"]
        self.log_file = log_file
        self._log = open(log_file, "wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.url = f"sc://127.0.0.1:{self.port}"

    def wait(self, timeout: float = 120.0) -> None:
        """Until the gRPC port listens; raises with the server's log tail when it died or timed out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if _listening(self.port):
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not start: {self.log_file.read_text()[-3000:]}")

    def stop(self) -> None:
        """Kill the server's process group (spark-submit and its JVM), by the pid this object started."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self._log.close()
