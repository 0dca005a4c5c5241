"""Reading every supported input format and atomic Delta writes, on real Delta tables."""

import pytest
from pyspark.sql import functions as F

from privsyn_spark.runtime.tables import detect_format, read_table, table_properties, write_delta
from privsyn_spark.schema.infer import WARNING_HEADER, infer_schema
from privsyn_spark.schema.schema import save_schema


def test_session_defaults(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert "DeltaSparkSessionExtension" in spark.conf.get("spark.sql.extensions")


def test_read_every_format(spark, tmp_path):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string")
    df.write.parquet(str(tmp_path / "p"))
    df.write.option("header", True).csv(str(tmp_path / "c.csv"))
    write_delta(df, str(tmp_path / "d"))
    df.write.format("delta").saveAsTable("privsyn_catalog_t")
    try:
        assert detect_format(str(tmp_path / "d")) == "delta"
        assert detect_format(str(tmp_path / "p")) == "parquet"
        assert detect_format(str(tmp_path / "c.csv")) == "csv"
        assert detect_format("privsyn_catalog_t") == "table"
        for source in ("p", "c.csv", "d"):
            got = read_table(spark, str(tmp_path / source)).orderBy("k").collect()
            assert [tuple(r) for r in got] == [(1, "a"), (2, "b")], source
        assert read_table(spark, "privsyn_catalog_t").count() == 2
    finally:
        spark.sql("DROP TABLE IF EXISTS privsyn_catalog_t")


def test_delta_write_is_atomic_and_keeps_properties(spark, tmp_path):
    target = str(tmp_path / "out")
    v0 = write_delta(spark.range(5), target, properties={"privsyn.run_id": "r1"}, user_metadata={"run": "r1"})
    assert table_properties(spark, target)["privsyn.run_id"] == "r1"
    failing = spark.range(100).withColumn(
        "id", F.when(F.col("id") > 50, F.raise_error(F.lit("executor failure"))).otherwise(F.col("id")))
    with pytest.raises(Exception, match="executor failure"):
        write_delta(failing, target)
    assert spark.read.format("delta").load(target).count() == 5  # the previous version is intact
    v1 = write_delta(spark.range(3), target, mode="append")
    assert v1 > v0 and spark.read.format("delta").load(target).count() == 8


def test_infer_schema_drafts_and_warns(spark, tmp_path):
    df = spark.read.csv("privsyn_spark/sample/adult.csv.gz", header=True, inferSchema=True)
    draft = infer_schema(df, null_tokens=("?",), max_categories=50)
    kinds = {c.name: c.kind for c in draft.columns}
    assert kinds["age"] == "numerical" and kinds["workclass"] == "categorical"
    assert "?" not in draft.column("workclass").values
    path = tmp_path / "draft.yaml"
    save_schema(draft, path, header=WARNING_HEADER)
    assert "NOT private" in path.read_text()
