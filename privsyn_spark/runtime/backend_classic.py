"""The backend of a classic SparkSession (:mod:`privsyn_spark.runtime.backend`): py4j, SparkContext, RDD tree
aggregation, broadcasts, the Hadoop file system and delta-spark's ``DeltaTable``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.runtime.locations import is_path, location

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _add(total: np.ndarray | None, vector: np.ndarray | None) -> np.ndarray | None:
    """Tree-aggregation step of :meth:`ClassicBackend.sum_vectors` (None: nothing summed yet)."""
    if total is None:
        return vector
    return total if vector is None else total + vector


_Partial = tuple["np.ndarray | None", int]
"""A partial sum of vectors (None: none yet) and the largest peak so far."""


def _add_peak(left: _Partial, right: _Partial) -> _Partial:
    """Tree-aggregation step of :meth:`ClassicBackend.sum_vectors_and_peak`: add the vectors, keep the larger peak."""
    return _add(left[0], right[0]), max(left[1], right[1])


class ClassicBackend:
    """A classic session's operations (see :class:`~privsyn_spark.runtime.backend.SparkBackend`)."""

    name = "classic"
    jvm = True

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def default_parallelism(self) -> int:
        """``sparkContext.defaultParallelism``."""
        return int(self.spark.sparkContext.defaultParallelism)

    def broadcast(self, value: Any) -> Any:
        """A Broadcast of ``value``."""
        return self.spark.sparkContext.broadcast(value)

    def sum_vectors(self, df: DataFrame, column: str) -> np.ndarray | None:
        """An RDD ``treeAggregate`` (depth 2) of the vectors; None when ``df`` has no rows."""
        vectors = df.select(column).rdd.map(lambda row: np.frombuffer(row[0], dtype=np.int64))
        return vectors.treeAggregate(None, _add, _add, depth=2)

    def sum_vectors_and_peak(self, df: DataFrame, column: str, peak: str) -> tuple[np.ndarray | None, int]:
        """One RDD ``treeAggregate`` (depth 2) of the vectors and the largest ``peak``."""
        rows = df.select(column, peak).rdd.map(lambda row: (np.frombuffer(row[0], dtype=np.int64), int(row[1])))
        zero: _Partial = (None, 0)
        return rows.treeAggregate(zero, _add_peak, _add_peak, depth=2)

    def master(self) -> str:
        """``sparkContext.master``."""
        return str(self.spark.sparkContext.master)

    def checkpointed_rdds(self, df: DataFrame) -> set[int]:
        """The ``rdd`` ids of the ``LogicalRDD`` leaves of ``df``'s analyzed plan."""
        leaves = df._jdf.queryExecution().analyzed().collectLeaves()
        nodes = [leaves.apply(i) for i in range(leaves.size())]
        return {int(n.rdd().id()) for n in nodes if n.getClass().getSimpleName() == "LogicalRDD"}

    def release_rdds(self, ids: set[int]) -> None:
        """``unpersist`` (blocking) of each of ``ids`` still stored."""
        stored = self.spark.sparkContext._jsc.getPersistentRDDs()
        for i in sorted(ids):
            rdd = stored.get(i)
            if rdd is not None:
                rdd.unpersist(True)

    def context_file_system(self, location: str) -> tuple[Any, Any]:
        """The Hadoop file system of ``location`` under the SparkContext's Hadoop configuration, and its Path."""
        jvm: Any = self.spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(location)
        return path.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration()), path

    def session_file_system(self, location: str) -> tuple[Any, Any]:
        """The Hadoop file system of ``location`` under the session's Hadoop configuration, and its qualified Path."""
        jvm: Any = self.spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(location)
        fs = path.getFileSystem(self.spark._jsparkSession.sessionState().newHadoopConf())
        return fs, fs.makeQualified(path)

    def context_checkpoint_dir(self) -> str | None:
        """``sparkContext.getCheckpointDir()``."""
        return self.spark.sparkContext.getCheckpointDir()

    def checkpoint_folder(self, requested: str | None) -> str | None:
        """Sets ``requested`` (when given) as the SparkContext's checkpoint folder; the folder it then has."""
        if requested is not None:
            self.spark.sparkContext.setCheckpointDir(requested)
        return self.spark.sparkContext.getCheckpointDir()

    def delta_log_version(self, target: str) -> int | None:
        """``DeltaLog.forTable(...).update(...).version()`` by py4j (Delta-internal: None if it changed)."""
        jvm: Any = self.spark._jvm
        try:
            none = jvm.scala.Option.empty()
            delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, location(target))
            return int(delta_log.update(False, none, none).version())
        except Exception as error:  # noqa: BLE001 - py4j: the method is Delta-internal and may change between releases
            log.debug("Delta log snapshot unavailable (%s); reading the table's history", error)
            return None

    def is_delta_table(self, target: str) -> bool:
        """``DeltaTable.isDeltaTable``."""
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, location(target)))

    def delta_table(self, target: str) -> Any:
        """delta-spark's ``DeltaTable`` of ``target`` (path or name)."""
        from delta.tables import DeltaTable

        if is_path(target):
            return DeltaTable.forPath(self.spark, location(target))
        return DeltaTable.forName(self.spark, target)

    def delta_frame(self, target: str) -> DataFrame:
        """``DeltaTable.toDF()`` (its schema from the Delta log; no data file read until an action)."""
        return self.delta_table(target).toDF()

    def create_delta_table(self, target: str, ddl: str, comment: str) -> None:
        """``DeltaTable.createIfNotExists`` with the columns of ``ddl``."""
        from delta.tables import DeltaTable
        from pyspark.sql.types import StructType

        builder = DeltaTable.createIfNotExists(self.spark)
        builder = builder.location(location(target)) if is_path(target) else builder.tableName(target)
        schema = StructType.fromDDL(ddl)
        assert isinstance(schema, StructType)
        builder.addColumns(schema).comment(comment).execute()

    def merge_insert(self, target: str, source: DataFrame, condition: str) -> Any:
        """``DeltaTable.merge(...).whenNotMatchedInsertAll()``."""
        return (self.delta_table(target).alias("t").merge(source.alias("s"), condition)
                .whenNotMatchedInsertAll().execute())

    def plain_strings(self, df: DataFrame, columns: list[str]) -> DataFrame:
        """``df`` as it is (a classic UDF's strings carry no collation)."""
        return df
