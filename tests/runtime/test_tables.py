"""Reading every supported input format; a Delta table at its current version only."""

import pytest
from pyspark.sql import functions as F

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.input_table import delta_root, read_table
from privsyn_spark.write.delta_output import write_delta


def test_read_every_format(spark, tmp_path):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string")
    df.write.parquet(str(tmp_path / "p"))
    df.write.option("header", True).csv(str(tmp_path / "c.csv"))
    write_delta(df, str(tmp_path / "d"))
    df.write.format("delta").saveAsTable("privsyn_catalog_t")
    try:
        for source in (str(tmp_path / "p"), str(tmp_path / "c.csv"), str(tmp_path / "d"), "privsyn_catalog_t"):
            got = read_table(spark, source).orderBy("k").collect()
            assert [tuple(r) for r in got] == [(1, "a"), (2, "b")], source
    finally:
        spark.sql("DROP TABLE IF EXISTS privsyn_catalog_t")


def test_a_delta_table_at_a_uri_is_read_at_its_current_version_only(spark, tmp_path):
    """History and deletes: old versions and removed files must not enter the input."""
    path = tmp_path / "history"
    uri = path.as_uri()  # file:///...
    write_delta(spark.range(1000), uri)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 500")
    write_delta(spark.range(1000, 1010), uri, mode="overwrite")
    assert len(list(path.glob("*.parquet"))) >= 2  # the old files are still there
    assert delta_root(spark, uri) == f"file:{path}"  # read as Delta: the old files are not rows
    for source in (uri, str(path), f"file:{path}"):
        got = read_table(spark, source)
        assert got.count() == 10 and got.agg(F.min("id")).first()[0] == 1000, source
    with pytest.raises(UsageError, match="cannot be read as parquet"):
        read_table(spark, uri, "parquet")
    (path / "sub").mkdir()
    with pytest.raises(UsageError, match="inside the Delta table"):
        read_table(spark, str(path / "sub"))
