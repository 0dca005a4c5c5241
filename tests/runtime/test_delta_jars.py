"""`privsyn-spark jars` through the real CLI: the spark-submit line and the cache's state without Spark, and
(slow) a fetch from Maven Central with Spark's own Ivy into an empty cache that a session then uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from privsyn_spark.runtime.session import DELTA_JAR_VERSION

ROOT = Path(__file__).resolve().parents[2]
MINOR = ".".join(pyspark.__version__.split(".")[:2])
PACKAGE = f"io.delta:delta-spark_{MINOR}_2.13:{DELTA_JAR_VERSION}"


def cli(*argv: str, cache: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "PRIVSYN_SPARK_JARS_DIR": str(cache), **env}
    environment.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=environment, cwd=cwd, timeout=900)


def test_jars_prints_the_submit_line_and_an_empty_cache(tmp_path):
    done = cli("jars", cache=tmp_path / "empty", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Delta for Spark {MINOR}: {PACKAGE}"
    assert f"cache: {tmp_path / 'empty'} (PRIVSYN_SPARK_JARS_DIR): no Delta jars for this Spark" in lines[1]
    assert "`privsyn-spark jars --fetch` fills it" in lines[1]
    assert lines[2] == ("class archive: none for this java, pyspark and driver memory (`privsyn-spark jars "
                        "--class-archive` builds it)")
    assert lines[3].startswith(f"spark-submit: --packages {PACKAGE} --conf spark.sql.extensions="
                               "io.delta.sql.DeltaSparkSessionExtension --conf spark.sql.catalog.spark_catalog="
                               "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    assert "SparkContext" not in done.stderr and not (tmp_path / "empty").exists()  # no session, nothing written


@pytest.mark.slow
def test_fetch_fills_the_cache_from_maven_central_and_a_session_uses_it(tmp_path):
    cache, home = tmp_path / "jars", tmp_path / "home"  # an empty ~/.m2 for Ivy: the jars come from Maven Central
    home.mkdir()
    done = cli("jars", "--fetch", cache=cache, cwd=tmp_path, SPARK_SUBMIT_OPTS=f"-Duser.home={home}")
    assert done.returncode == 0, done.stderr[-3000:]
    names = {p.name for p in cache.glob("*.jar")}
    assert {f"delta-spark_{MINOR}_2.13-{DELTA_JAR_VERSION}.jar", f"delta-storage-{DELTA_JAR_VERSION}.jar"} <= names
    assert not any(n.startswith(("hadoop-", "slf4j-", "jackson-", "log4j-")) for n in names)  # Spark ships those
    assert f"(PRIVSYN_SPARK_JARS_DIR): {len(names)} jars, used by every session started here" in done.stdout
    ledger = tmp_path / "ledger"  # a session started with the cache: Delta works without spark.jars.packages
    made = cli("budget", "set", "--ledger", str(ledger), "--dataset-id", "d", "--epsilon", "1", "--delta", "1e-9",
               "--master", "local[1]", cache=cache, cwd=tmp_path, SPARK_SUBMIT_OPTS=f"-Duser.home={home}")
    assert made.returncode == 0, made.stderr[-3000:]
    assert (ledger / "_delta_log").is_dir() and not (home / ".ivy2.5.2").exists()
