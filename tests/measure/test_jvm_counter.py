"""The JVM counter's jar: built by Maven into the package, wired into sessions, version-checked."""

import logging
import zipfile

import numpy as np
import pyspark
import pytest

from privsyn_spark.measure import jvm_counter
from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import count_marginals
from privsyn_spark.measure.jvm_counter import CounterDeploymentError, jvm_counter_loaded
from privsyn_spark.runtime.counter_jar import JAR_NAME, JAR_PREFIX, jar_spark_version, packaged_jar
from privsyn_spark.runtime.session import _jar_conf
from privsyn_spark.schema.schema import parse_schema


def test_the_package_ships_a_jar_built_for_this_spark():
    jar = packaged_jar()
    assert jar is not None and jar.name == JAR_NAME and jar.parent.name == "jvm"
    with zipfile.ZipFile(jar) as z:
        assert "io/privsyn/spark/MarginalCounter.class" in z.namelist()
    assert jar_spark_version(jar).split(".")[:2] == pyspark.__version__.split(".")[:2]


def test_a_jar_for_another_spark_is_not_used_and_says_why(tmp_path, caplog):
    other = tmp_path / JAR_NAME
    with zipfile.ZipFile(packaged_jar()) as src, zipfile.ZipFile(other, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("counter.properties"):
                data = b"spark.version=3.5.1\n"
            dst.writestr(item, data)
    with caplog.at_level(logging.WARNING):
        assert packaged_jar(other) is None
    assert "built for Spark 3.5.1" in caplog.text and "rebuild it with scripts/setup.sh" in caplog.text
    with caplog.at_level(logging.WARNING):
        assert packaged_jar(tmp_path / "missing.jar") is None
    assert "is missing" in caplog.text


def test_session_jars_keep_the_callers_and_add_the_counter(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVSYN_SPARK_JARS_DIR", str(tmp_path))
    (tmp_path / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    (tmp_path / f"{JAR_PREFIX}aa237edcf983.jar").write_bytes(b"")  # an older build in a shared cache: ignored
    counter = str(packaged_jar())
    local = _jar_conf({}, delta=True)["spark.jars"].split(",")
    assert local == [str(tmp_path / "delta-spark_4.2_2.13-4.4.0.jar"), counter]
    assert (tmp_path / f"{JAR_PREFIX}aa237edcf983.jar").exists()  # nothing in the cache is deleted
    given = _jar_conf({"spark.jars": "/opt/x.jar"}, delta=True)
    assert given == {"spark.jars": f"/opt/x.jar,{counter}"}
    packages = _jar_conf({"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0"}, delta=True)
    assert packages == {"spark.jars": counter}
    submitted = _jar_conf({"spark.jars": "/opt/x.jar"}, delta=True, submitted=True)  # spark-submit: --jars only
    assert submitted == {"spark.jars": "/opt/x.jar"}


ROWS = [("x", 0), ("y", 1), ("z", 1), ("y", 0)]


def _encoded(spark):
    schema = parse_schema({"columns": [{"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
                                       {"name": "b", "type": "categorical", "values": [0, 1]}]})
    df = spark.createDataFrame(ROWS, "a string, b int")
    return encode(df, schema)


def test_an_executor_with_another_spark_than_the_plan_fails_clearly(spark, monkeypatch):
    assert jvm_counter_loaded(spark)
    encoded = _encoded(spark)
    table = count_marginals(encoded, [("a", "b")], backend="jvm").tables[("a", "b")]
    expected = np.zeros(table.shape, dtype=np.int64)
    for a, b in ROWS:  # brute force: codes are the positions in the declared values
        expected["xyz".index(a), b] += 1
    np.testing.assert_array_equal(table, expected)
    plan_bytes = jvm_counter._layout_bytes

    def plan_from_another_driver(layout, spark_version):  # a driver on Spark 3.9 sent this plan
        return plan_bytes(layout, "3.9.0")

    monkeypatch.setattr(jvm_counter, "_layout_bytes", plan_from_another_driver)
    with pytest.raises(CounterDeploymentError, match=r"driver runs Spark 3\.9, this executor runs Spark"):
        count_marginals(encoded, [("a", "b")], backend="jvm")


def test_a_plan_of_another_version_fails_clearly(spark, monkeypatch):
    monkeypatch.setattr(jvm_counter, "PLAN_VERSION", jvm_counter.PLAN_VERSION + 1)
    with pytest.raises(CounterDeploymentError, match="not the one privsyn-spark ships"):
        count_marginals(_encoded(spark), [("a", "b")], backend="jvm")
