"""Delta writes with their provenance, on real Delta tables (read back with delta-rs, a second engine,
where the commit layout matters): properties in the data commit, the provenance command, atomic writes."""

import json

import pytest
from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import functions as F

from privsyn_spark.cli import main
from privsyn_spark.errors import UsageError
from privsyn_spark.write.delta_output import latest_version, provenance, table_properties, write_delta


def test_provenance_is_in_the_data_commit(spark, tmp_path):
    """Version 0 already carries the properties, comment, partitioning and the run record (delta-rs)."""
    target = str(tmp_path / "out")
    df = spark.range(6).withColumn("g", F.col("id") % 2)
    run1 = {"privsyn.run_id": "r1", "privsyn.epsilon": "1.0", "privsyn.delta": "1e-09", "privsyn.rho": "0.01"}
    v0 = write_delta(df, target, properties={**run1, "department": "team-a"}, user_metadata=run1,
                     partition_by=["g"], comment="synthetic, DP")
    assert v0 == 0
    rust = RustDeltaTable(target, version=0)
    meta = rust.metadata()
    assert meta.configuration["privsyn.run_id"] == "r1" and meta.configuration["department"] == "team-a"
    assert meta.description == "synthetic, DP" and meta.partition_columns == ["g"]
    history = RustDeltaTable(target).history()
    assert len(history) == 1 and json.loads(history[0]["userMetadata"]) == run1

    run2 = {**run1, "privsyn.run_id": "r2", "privsyn.epsilon": "0.5"}
    assert write_delta(spark.range(3).withColumn("g", F.lit(1)), target, mode="append", user_metadata=run2) == 1
    assert RustDeltaTable(target).metadata().configuration["privsyn.run_id"] == "r1"  # the creating run's
    assert [(e["version"], e["run"]["privsyn.run_id"]) for e in provenance(spark, target)] == [(1, "r2"), (0, "r1")]
    assert RustDeltaTable(target).to_pyarrow_table().num_rows == 9
    with pytest.raises(UsageError, match="partitioned by"):
        write_delta(spark.range(1).withColumn("g", F.lit(0)), target, mode="append", partition_by=["id"])


def test_catalog_tables_get_provenance_in_one_commit(spark):
    try:
        write_delta(spark.range(4), "privsyn_prov_t", properties={"privsyn.run_id": "c1"},
                    user_metadata={"privsyn.run_id": "c1"}, comment="c")
        location = spark.sql("DESCRIBE DETAIL privsyn_prov_t").first()["location"]
        rust = RustDeltaTable(location, version=0)
        assert rust.metadata().configuration["privsyn.run_id"] == "c1" and rust.metadata().description == "c"
        assert table_properties(spark, "privsyn_prov_t")["privsyn.run_id"] == "c1"
        assert [e["run"] for e in provenance(spark, "privsyn_prov_t")] == [{"privsyn.run_id": "c1"}]
    finally:
        spark.sql("DROP TABLE IF EXISTS privsyn_prov_t")


def test_provenance_command_lists_every_version(spark, tmp_path, capsys):
    target = str(tmp_path / "t")
    for run_id, mode in (("a1", "overwrite"), ("a2", "append")):
        write_delta(spark.range(2), target, mode=mode, user_metadata={
            "privsyn.run_id": run_id, "privsyn.epsilon": "1.0", "privsyn.delta": "1e-09", "privsyn.rho": "0.02"})
    assert main(["provenance", target]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and "run=a2" in lines[0] and "run=a1" in lines[1]
    assert "epsilon=1.0" in lines[1] and "delta=1e-09" in lines[1] and "rho=0.02" in lines[1]
    assert main(["provenance", "--json", target]) == 0
    assert [json.loads(x)["version"] for x in capsys.readouterr().out.splitlines()] == [1, 0]


def test_latest_version_is_the_history_s_newest_even_after_another_writer(spark, tmp_path):
    """The version a write returns comes from the Delta log (no job); a commit by another engine
    (delta-rs) since this session last looked is seen, as the table's history sees it."""
    from deltalake import write_deltalake

    target = str(tmp_path / "out")
    assert write_delta(spark.range(2), target) == 0
    assert write_delta(spark.range(3), target, mode="overwrite") == 1  # replacing the table: a new version
    write_deltalake(target, RustDeltaTable(target).to_pyarrow_table(), mode="append")
    newest = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").agg(F.max("version")).first()[0]
    assert newest == 2 and latest_version(spark, target) == 2
    sc = spark.sparkContext
    sc.setJobGroup("privsyn-test-latest-version", "jobs of latest_version")
    try:
        latest_version(spark, target)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert sc.statusTracker().getJobIdsForGroup("privsyn-test-latest-version") == []  # the log, not a query
    assert write_delta(spark.range(1), target, mode="append") == 3


def test_delta_write_is_atomic(spark, tmp_path):
    target = str(tmp_path / "out")
    v0 = write_delta(spark.range(5), target, properties={"privsyn.run_id": "r1"})
    failing = spark.range(100).withColumn(
        "id", F.when(F.col("id") > 50, F.raise_error(F.lit("executor failure"))).otherwise(F.col("id")))
    with pytest.raises(Exception, match="executor failure"):
        write_delta(failing, target, mode="overwrite")
    assert spark.read.format("delta").load(target).count() == 5  # the previous version is intact
    assert table_properties(spark, target)["privsyn.run_id"] == "r1"
    v1 = write_delta(spark.range(3), target, mode="append")
    assert v1 > v0 and spark.read.format("delta").load(target).count() == 8


def test_the_default_mode_refuses_a_table_or_partition_holding_rows(spark, tmp_path):
    """As Spark's and Delta's error-if-exists: a table holding rows is replaced only in mode overwrite;
    with a partition, only that partition's rows count."""
    target = str(tmp_path / "out")
    assert write_delta(spark.range(2), target) == 0
    with pytest.raises(UsageError, match=r"already holds rows: pass --mode overwrite to replace the table"):
        write_delta(spark.range(3), target)
    assert latest_version(spark, target) == 0 and spark.read.format("delta").load(target).count() == 2
    assert write_delta(spark.range(3), target, mode="overwrite") == 1

    days = str(tmp_path / "days")
    write_delta(spark.range(2), days, partition=[("day", "1")], partition_types={"day": "int"})
    write_delta(spark.range(3), days, partition=[("day", "2")])  # another partition: nothing of it is there yet
    with pytest.raises(UsageError, match=r"already holds rows in partition day=1: .*replace that partition"):
        write_delta(spark.range(5), days, partition=[("day", "1")])
    write_delta(spark.range(5), days, mode="overwrite", partition=[("day", "1")])
    counts = {r["day"]: r["count"] for r in spark.read.format("delta").load(days).groupBy("day").count().collect()}
    assert counts == {1: 5, 2: 3}
