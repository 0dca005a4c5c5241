"""A write that fails before its commit leaves no data file in the table's folder (the files its
finished tasks wrote are removed), and never touches the files of earlier versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from privsyn_spark.write.delta_output import write_delta


def _data_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*.parquet") if "_delta_log" not in p.parts}


def _failing(spark):
    """Eight tasks, the last of which fails: the first ones have written their files by then."""
    return spark.range(0, 800, 1, 8).withColumn(
        "id", F.when(F.col("id") > 790, F.raise_error(F.lit("executor failure"))).otherwise(F.col("id")))


def test_a_failed_write_leaves_no_data_file(spark, tmp_path):
    fresh = tmp_path / "fresh"
    with pytest.raises(Exception, match="executor failure"):
        write_delta(_failing(spark), str(fresh))
    assert not fresh.exists() or _data_files(fresh) == set()

    table = tmp_path / "table"
    write_delta(spark.range(5), str(table))
    write_delta(spark.range(7), str(table), mode="overwrite")  # version 0's files stay on disk (time travel)
    before = _data_files(table)
    assert len(before) >= 2
    for mode in ("overwrite", "append"):
        with pytest.raises(Exception, match="executor failure"):
            write_delta(_failing(spark), str(table), mode=mode)
        assert _data_files(table) == before, mode
    assert spark.read.format("delta").load(str(table)).count() == 7
    assert spark.read.format("delta").option("versionAsOf", 0).load(str(table)).count() == 5
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # the caller's properties restored
