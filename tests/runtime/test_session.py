"""The session builder never reconfigures the caller's session: it only adds what Delta needs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.session import (
    CATALOG_KEY,
    DELTA_CATALOG,
    DELTA_EXTENSION,
    EXTENSIONS_KEY,
    JAVA_OPTIONS_KEY,
    LOCAL_PARTITIONS,
    QUICK_JIT,
    SMALL_JOB_BYTES,
    SMALL_JOB_ROWS,
    build_spark_session,
    delta_settings,
    local_settings,
    small_job,
)
from tests.jobs.conftest import base_env, delta_jars

PROBE = Path(__file__).with_name("session_probe.py")


def test_delta_settings_append_the_extension_and_set_the_catalog_only_if_unset():
    assert delta_settings({}) == {EXTENSIONS_KEY: DELTA_EXTENSION, CATALOG_KEY: DELTA_CATALOG}
    given = {EXTENSIONS_KEY: "a.One, b.Two", CATALOG_KEY: "my.Catalog"}
    assert delta_settings(given) == {EXTENSIONS_KEY: f"a.One,b.Two,{DELTA_EXTENSION}"}
    assert delta_settings({EXTENSIONS_KEY: f"a.One,{DELTA_EXTENSION}", CATALOG_KEY: DELTA_CATALOG}) == {}


def test_an_active_session_is_returned_unchanged(spark):
    """A notebook's session: the builder returns it and changes none of its settings."""
    keys = {"spark.sql.session.timeZone": "America/Los_Angeles", "spark.sql.shuffle.partitions": "3",
            "spark.sql.adaptive.enabled": "false"}
    before = {k: spark.conf.get(k) for k in keys}
    try:
        for key, value in keys.items():
            spark.conf.set(key, value)
        assert build_spark_session() is spark
        assert build_spark_session(conf={"spark.sql.shuffle.partitions": "3"}) is spark  # already so
        assert {k: spark.conf.get(k) for k in keys} == keys
        with pytest.raises(UsageError, match="already running.*spark.sql.shuffle.partitions"):
            build_spark_session(conf={"spark.sql.shuffle.partitions": "8"})
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def _submit(tmp_path, *args, conf=()):
    command = ["spark-submit", "--master", "local[1]", "--jars", delta_jars(), "--conf", "spark.ui.enabled=false"]
    for item in conf:
        command += ["--conf", item]
    done = subprocess.run([*command, str(PROBE), *args], capture_output=True, text=True, timeout=600,
                          env=base_env(PYTHONPATH=str(Path(__file__).resolve().parents[2])), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_spark_submit_settings_are_kept_and_delta_is_added(tmp_path):
    """Under spark-submit --conf: time zone, AQE, shuffle partitions unchanged; on its local master the
    unset Delta log partitions get the local default; the two caller extensions kept with Delta's
    appended; the catalog set because it was unset; a Delta table written and read."""
    out = _submit(tmp_path, "pipeline", str(tmp_path / "t"), conf=["spark.app.name=callers-job",
        "spark.sql.session.timeZone=America/New_York", "spark.sql.adaptive.enabled=false",
        "spark.sql.shuffle.partitions=3",
        "spark.sql.extensions=org.example.NoSuchExtension,org.example.OtherExtension"])
    assert out["conf"] == {
        "spark.app.name": "callers-job", "spark.sql.session.timeZone": "America/New_York",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": "3",
        "spark.databricks.delta.snapshotPartitions": LOCAL_PARTITIONS["spark.databricks.delta.snapshotPartitions"],
        "spark.sql.extensions": f"org.example.NoSuchExtension,org.example.OtherExtension,{DELTA_EXTENSION}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG}
    assert out["version"] == 0 and out["rows"] == 4


@pytest.mark.slow
def test_a_running_session_without_delta_gets_a_clear_error(tmp_path):
    out = _submit(tmp_path, "caller-session-without-delta")
    assert out["error"] and "static setting" in out["error"] and DELTA_EXTENSION in out["error"]


def test_a_small_job_is_a_small_local_input_asking_for_few_rows(tmp_path):
    table = tmp_path / "table"
    (table / "_delta_log").mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"x" * (SMALL_JOB_BYTES // 2))
    (table / "_delta_log" / "0.json").write_bytes(b"x" * (SMALL_JOB_BYTES // 2))
    assert small_job(str(table)) and small_job(f"file://{table}") and small_job(str(table), SMALL_JOB_ROWS)
    assert not small_job(str(table), SMALL_JOB_ROWS + 1)  # --rows asks for more than a small job makes
    (table / "_delta_log" / "1.json").write_bytes(b"x")  # every file below the folder counts
    assert not small_job(str(table))
    assert small_job(str(table / "part-0.parquet"))
    for elsewhere in ("s3a://bucket/table", "hdfs://127.0.0.1/t", "db.table", str(tmp_path / "missing"), None):
        assert not small_job(elsewhere)


def test_a_small_job_compiles_with_c1_alone_unless_the_caller_set_java_options():
    assert QUICK_JIT in local_settings({}, small=True)[JAVA_OPTIONS_KEY].split()
    assert QUICK_JIT not in local_settings({})[JAVA_OPTIONS_KEY].split()
    assert JAVA_OPTIONS_KEY not in local_settings({JAVA_OPTIONS_KEY: "-Dmine=1"}, small=True)


@pytest.mark.slow
def test_the_driver_jvm_of_a_small_job_runs_with_its_options(tmp_path):
    """The options reach the JVM that starts (not only the session's settings)."""
    probe = ("from privsyn_spark.runtime.session import build_spark_session as b; "
             "s = b(master='local[1]', delta=False, small=True); "
             "print(list(s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()"
             ".getInputArguments()))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env=base_env(PYTHONPATH=str(Path(__file__).resolve().parents[2])), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert QUICK_JIT in done.stdout.strip().splitlines()[-1]
