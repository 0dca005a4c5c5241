"""A Delta table by location or catalog name: its SQL identifier, whether it exists, its rows and schema, and
the MERGE the ledger inserts with.

On a classic session these go through delta-spark's ``DeltaTable``; on Spark Connect that class needs the
Delta Connect plugin on the server (``DeltaCommandPlugin``, not published for every Spark), so there the
same operations are Delta's SQL (``DESCRIBE DETAIL``, ``CREATE TABLE``, ``MERGE INTO``), which any server with
Delta's SQL extension runs.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from privsyn_spark.runtime.locations import is_path, location
from privsyn_spark.runtime.remote import is_connect

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def delta_identifier(target: str) -> str:
    """The SQL identifier of a Delta table: ``delta.`<location>``` for a path, the name otherwise."""
    if is_path(target):
        return "delta.`" + location(target).replace("`", "``") + "`"
    return target


def is_delta_table(spark: SparkSession, target: str) -> bool:
    """Whether a Delta table is at the path ``target`` (its log has a first commit)."""
    if not is_connect(spark):
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, location(target)))
    try:
        row = spark.sql(f"DESCRIBE DETAIL {delta_identifier(target)}").select("format").head()
    except Exception:  # noqa: BLE001 - no table there (Delta's error class varies between releases)
        return False
    return row is not None and str(row[0]).lower() == "delta"


def delta_frame(spark: SparkSession, target: str) -> DataFrame:
    """The table as a lazy DataFrame (its schema comes from the Delta log; no data file is read until an action)."""
    if is_connect(spark):
        return spark.read.format("delta").load(location(target)) if is_path(target) else spark.table(target)
    return delta_table(spark, target).toDF()


def delta_table(spark: SparkSession, target: str) -> Any:
    """delta-spark's ``DeltaTable`` of ``target`` (classic sessions; see the module docstring)."""
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, location(target)) if is_path(target) else DeltaTable.forName(spark, target)


def create_if_not_exists(spark: SparkSession, target: str, ddl: str, comment: str) -> None:
    """Create an empty Delta table of columns ``ddl`` at ``target`` unless one is there."""
    if is_connect(spark):
        text = comment.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_identifier(target)} ({ddl}) USING delta COMMENT '{text}'")
        return
    from delta.tables import DeltaTable
    from pyspark.sql.types import StructType

    builder = DeltaTable.createIfNotExists(spark)
    builder = builder.location(location(target)) if is_path(target) else builder.tableName(target)
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    builder.addColumns(schema).comment(comment).execute()


def merge_insert(spark: SparkSession, target: str, source: DataFrame, condition: str) -> Any:
    """``MERGE INTO target t USING source s ON condition WHEN NOT MATCHED THEN INSERT *``: its metrics
    DataFrame (``num_inserted_rows``, ...) or None."""
    if not is_connect(spark):
        return (delta_table(spark, target).alias("t").merge(source.alias("s"), condition)
                .whenNotMatchedInsertAll().execute())
    view = f"privsyn_merge_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        metrics = spark.sql(f"MERGE INTO {delta_identifier(target)} t USING {view} s ON {condition} "
                            f"WHEN NOT MATCHED THEN INSERT *")
        metrics.collect()  # the MERGE runs here (a Connect command is lazy until an action on its result)
        return metrics
    finally:
        spark.catalog.dropTempView(view)
