"""The JVM counter's jar: built from the shipped source, cached by content, wired into every session."""

from __future__ import annotations

import logging
import zipfile

from privsyn_spark.measure import jvm_counter
from privsyn_spark.measure.jvm_counter import JAR_PREFIX, counter_jar
from privsyn_spark.runtime.session import _jar_conf


def test_counter_jar_is_built_once_and_replaces_stale_builds(tmp_path):
    stale = tmp_path / f"{JAR_PREFIX}000000000000.jar"
    stale.write_bytes(b"old")
    jar = counter_jar(tmp_path)
    assert jar is not None and jar.parent == tmp_path and not stale.exists()
    with zipfile.ZipFile(jar) as z:
        assert "io/privsyn/spark/MarginalCounter.class" in z.namelist()
    built = jar.stat().st_mtime_ns
    assert counter_jar(tmp_path) == jar and jar.stat().st_mtime_ns == built  # cached, not rebuilt


def test_without_javac_the_engine_falls_back_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(jvm_counter, "_javac", lambda: None)
    with caplog.at_level(logging.WARNING):
        assert counter_jar(tmp_path) is None
    assert "no javac" in caplog.text and not list(tmp_path.iterdir())


def test_session_jars_keep_the_callers_and_add_the_counter(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVSYN_SPARK_JARS_DIR", str(tmp_path))
    (tmp_path / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    counter = counter_jar(tmp_path)
    local = _jar_conf({}, delta=True)["spark.jars"].split(",")
    assert local == [str(tmp_path / "delta-spark_4.2_2.13-4.4.0.jar"), str(counter)]
    given = _jar_conf({"spark.jars": "/opt/x.jar"}, delta=True)
    assert given == {"spark.jars": f"/opt/x.jar,{counter}"}
    packages = _jar_conf({"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0"}, delta=True)
    assert packages == {"spark.jars": str(counter)}
    submitted = _jar_conf({"spark.jars": f"/opt/x.jar,{counter}"}, delta=True)  # spark-submit --jars had it
    assert submitted == {"spark.jars": f"/opt/x.jar,{counter}"}
