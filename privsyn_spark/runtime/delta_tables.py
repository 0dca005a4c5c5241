"""A Delta table by location or catalog name: whether it exists, its rows and schema, and the MERGE the
ledger inserts with.

On a classic session these go through delta-spark's ``DeltaTable``; on Spark Connect that class needs the
Delta Connect plugin on the server (``DeltaCommandPlugin``, not published for every Spark), so there the
same operations are Delta's SQL (``DESCRIBE DETAIL``, ``CREATE TABLE``, ``MERGE INTO``), which any server with
Delta's SQL extension runs (:mod:`privsyn_spark.runtime.backend`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from privsyn_spark.runtime.backend import backend_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def is_delta_table(spark: SparkSession, target: str) -> bool:
    """Whether a Delta table is at the path ``target`` (its log has a first commit)."""
    return backend_of(spark).is_delta_table(target)


def delta_frame(spark: SparkSession, target: str) -> DataFrame:
    """The table as a lazy DataFrame (its schema comes from the Delta log; no data file is read until an action)."""
    return backend_of(spark).delta_frame(target)


def create_if_not_exists(spark: SparkSession, target: str, ddl: str, comment: str) -> None:
    """Create an empty Delta table of columns ``ddl`` at ``target`` unless one is there."""
    backend_of(spark).create_delta_table(target, ddl, comment)


def merge_insert(spark: SparkSession, target: str, source: DataFrame, condition: str) -> Any:
    """``MERGE INTO target t USING source s ON condition WHEN NOT MATCHED THEN INSERT *``: its metrics
    DataFrame (``num_inserted_rows``, ...) or None."""
    return backend_of(spark).merge_insert(target, source, condition)
