"""Helpers of the jobs/deploy tests: subprocess environments for Airflow and spark-submit, and a
Spark standalone cluster (one master, two workers on 127.0.0.1) started and stopped by process id."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DAGS_DIR = REPO / "deploy" / "airflow" / "dags"
JOBS_DIR = REPO / "jobs"
SAMPLE_INPUT = REPO / "privsyn_spark" / "sample" / "adult.csv.gz"
SAMPLE_SCHEMA = REPO / "privsyn_spark" / "sample" / "adult.schema.yaml"


def base_env(**extra: str) -> dict[str, str]:
    """Environment for a child process: the venv's bin first on PATH, Spark on 127.0.0.1."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.pop("PRIVSYN_SPARK_MASTER", None)
    env.update(extra)
    return env


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """A throwaway Airflow: its own AIRFLOW_HOME with SQLite, the repo's DAGs, a local[2] Spark connection."""
    return base_env(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS_DIR),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[2]"}',
        PRIVSYN_SPARK_CONN_ID="spark_local",
        **extra,
    )


@pytest.fixture(scope="session")
def migrated_airflow_db(tmp_path_factory) -> Path:
    """An Airflow SQLite metadata db, `airflow db migrate`d once per test process; tests copy it."""
    home = tmp_path_factory.mktemp("airflow_migrated")
    done = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=airflow_env(home), capture_output=True,
                          text=True, timeout=600, cwd=home)
    assert done.returncode == 0, done.stderr[-4000:]
    return home / "airflow.db"


@pytest.fixture
def airflow_home(tmp_path, migrated_airflow_db) -> Path:
    """A throwaway AIRFLOW_HOME (``tmp_path/airflow``) holding a copy of the migrated SQLite db."""
    home = tmp_path / "airflow"
    home.mkdir()
    shutil.copyfile(migrated_airflow_db, home / "airflow.db")
    return home


def spark_home() -> Path:
    """The pip-installed pyspark folder (it is a complete SPARK_HOME)."""
    import pyspark

    return Path(pyspark.__file__).parent


def delta_jars() -> str:
    """The Maven-resolved Delta jars and the package's counter jar (comma-separated) for spark-submit --jars."""
    from privsyn_spark.runtime.counter_jar import JAR_PREFIX, packaged_jar
    from privsyn_spark.runtime.session import jars_dir

    jars = [j for j in sorted(jars_dir().glob("*.jar")) if not j.name.startswith(JAR_PREFIX)]
    if not any(j.name.startswith("delta-spark_") for j in jars):
        pytest.skip(f"no Delta jars in {jars_dir()} (run scripts/setup.sh)")
    counter = packaged_jar()
    return ",".join(str(j) for j in [*jars, *([counter] if counter else [])])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Daemon:
    """A JVM started by the test (a master or a worker) and its log file."""

    name: str
    proc: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """Stop this process (by its pid) and wait for it; SIGKILL if it lingers."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)


@dataclass
class StandaloneCluster:
    """One master and its workers on 127.0.0.1 (spark-class from the pip-installed pyspark)."""

    root: Path
    master_port: int = field(default_factory=free_port)
    master: Daemon | None = None
    workers: list[Daemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        return base_env(SPARK_HOME=str(spark_home()), SPARK_LOG_DIR=str(self.root / "logs"),
                        SPARK_WORKER_DIR=str(self.root / "work"), SPARK_NO_DAEMONIZE="1")

    def _start(self, name: str, args: list[str]) -> Daemon:
        log = self.root / f"{name}.log"
        out = open(log, "wb")
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self._env(),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        return Daemon(name, proc, log)

    def start(self, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 180) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.master = self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", str(self.master_port), "--webui-port", str(free_port())])
        wait_for(lambda: "Starting Spark master" in self.master.text() and "I have been elected leader"
                 in self.master.text() or self._dead(self.master), timeout, "the Spark master")
        self._check(self.master)
        for i in range(workers):
            self.workers.append(self._start(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(cores), "--memory", memory, "--work-dir", str(self.root / f"work{i}")]))
        wait_for(lambda: self.registered_workers() >= workers or any(self._dead(w) for w in self.workers),
                 timeout, f"{workers} workers to register")
        for w in self.workers:
            self._check(w)

    def registered_workers(self) -> int:
        return len(re.findall(r"Registering worker", self.master.text())) if self.master else 0

    @staticmethod
    def _dead(daemon: Daemon) -> bool:
        return not daemon.alive()

    @staticmethod
    def _check(daemon: Daemon) -> None:
        if not daemon.alive():
            raise RuntimeError(f"{daemon.name} exited with {daemon.proc.returncode}:\n{daemon.text()[-3000:]}")

    def stop(self) -> None:
        """Stop the workers, then the master, each by its own process id."""
        for daemon in [*self.workers, *([self.master] if self.master else [])]:
            daemon.stop()


@pytest.fixture
def standalone_cluster(tmp_path):
    """A running standalone cluster (master + two 1-core workers); stopped by pid at teardown."""
    cluster = StandaloneCluster(tmp_path / "cluster")
    try:
        cluster.start(workers=2, cores=1, memory="1g")
        yield cluster
    finally:
        cluster.stop()
