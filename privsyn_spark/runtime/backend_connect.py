"""The backend of a Spark Connect session (:mod:`privsyn_spark.runtime.backend`): DataFrame and SQL steps only.

Vectors are summed by two DataFrame levels instead of an RDD tree; a broadcast's value travels inside
the UDF that reads it; Delta goes through SQL (``DESCRIBE DETAIL``, ``CREATE TABLE``, ``MERGE INTO``), which
any server with Delta's SQL extension runs (delta-spark's ``DeltaTable`` needs the Delta Connect plugin
on the server, not published for every Spark). There is no Hadoop file system on this side.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.runtime.locations import delta_identifier, is_path, location

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


class Inline:
    """A broadcast's stand-in on Spark Connect: the value travels inside the UDF that reads it
    (``.value`` as on a Broadcast; at most ``spark.connect.grpc.maxInboundMessageSize``, 128 MiB by default)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def unpersist(self) -> None:
        """Nothing to release (a Broadcast's method)."""


def _summed(column: int) -> Any:
    """mapInArrow body: the int64 vectors of binary column ``column`` of a partition, summed into one row."""
    def add(batches: Any) -> Any:
        import pyarrow as pa

        total = None
        for batch in batches:
            for value in batch.column(column).to_pylist():
                vector = np.frombuffer(value, dtype=np.int64)
                total = vector.copy() if total is None else total + vector
        if total is not None:
            yield pa.RecordBatch.from_arrays([pa.array([total.tobytes()], pa.binary())], ["v"])
    return add


class ConnectBackend:
    """A Spark Connect session's operations (see :class:`~privsyn_spark.runtime.backend.SparkBackend`)."""

    name = "connect"
    jvm = False
    groups = 16
    """The partitions the partial sums are shuffled into by :meth:`sum_vectors`."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._parallelism: int | None = None

    def default_parallelism(self) -> int:
        """The partitions of a plain ``spark.range`` (which Spark splits over the default parallelism),
        counted by one small job, once per session."""
        if self._parallelism is None:
            from pyspark.sql import functions as F

            parts = self.spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).distinct().count()
            self._parallelism = max(1, int(parts))
        return self._parallelism

    def broadcast(self, value: Any) -> Inline:
        """:class:`Inline` of ``value``."""
        return Inline(value)

    def sum_vectors(self, df: DataFrame, column: str) -> np.ndarray | None:
        """A two-level DataFrame tree: each partition sums its rows, the partials are shuffled into at most
        :attr:`groups` partitions and summed again, and the driver adds those few, one at a time."""
        partials = df.select(column).mapInArrow(_summed(0), "v binary")
        total = None
        for row in partials.repartition(self.groups).mapInArrow(_summed(0), "v binary").toLocalIterator():
            vector = np.frombuffer(row[0], dtype=np.int64)
            total = vector.copy() if total is None else total + vector
        return total

    def sum_vectors_and_peak(self, df: DataFrame, column: str, peak: str) -> tuple[np.ndarray | None, int]:
        """:meth:`sum_vectors`, and 0 for the peak (the DataFrame steps carry only the vectors)."""
        return self.sum_vectors(df, column), 0

    def master(self) -> str:
        """The server's ``spark.master`` ('' when it does not say)."""
        try:
            return str(self.spark.conf.get("spark.master", "") or "")
        except Exception:  # noqa: BLE001 - a server that does not expose it
            return ""

    def checkpointed_rdds(self, df: DataFrame) -> set[int]:
        """None seen from here: the server keeps them."""
        return set()

    def release_rdds(self, ids: set[int]) -> None:
        """Nothing: the server releases a local checkpoint with its DataFrame."""

    def context_file_system(self, location: str) -> None:
        """None: no Hadoop file system on this side."""
        return None

    def session_file_system(self, location: str) -> None:
        """None: no Hadoop file system on this side."""
        return None

    def context_checkpoint_dir(self) -> None:
        """None: the server's checkpoint folder is its own (no SparkContext here)."""
        return None

    def checkpoint_folder(self, requested: str | None) -> str | None:
        """The server's ``spark.checkpoint.dir`` (``requested`` cannot be set from here)."""
        return self.spark.conf.get("spark.checkpoint.dir", None)

    def delta_log_version(self, target: str) -> None:
        """None: the Delta log is not reachable from here (the caller reads the table's history)."""
        return None

    def is_delta_table(self, target: str) -> bool:
        """``DESCRIBE DETAIL`` of ``target`` says format delta."""
        try:
            row = self.spark.sql(f"DESCRIBE DETAIL {delta_identifier(target)}").select("format").head()
        except Exception:  # noqa: BLE001 - no table there (Delta's error class varies between releases)
            return False
        return row is not None and str(row[0]).lower() == "delta"

    def delta_frame(self, target: str) -> DataFrame:
        """``spark.read.format("delta")`` of a path, ``spark.table`` of a name."""
        return self.spark.read.format("delta").load(location(target)) if is_path(target) else self.spark.table(target)

    def create_delta_table(self, target: str, ddl: str, comment: str) -> None:
        """``CREATE TABLE IF NOT EXISTS ... USING delta``."""
        text = comment.replace("\\", "\\\\").replace("'", "\\'")
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_identifier(target)} ({ddl}) USING delta COMMENT '{text}'")

    def merge_insert(self, target: str, source: DataFrame, condition: str) -> DataFrame:
        """``MERGE INTO`` from a temporary view of ``source``; run here (a Connect command is lazy until an
        action on its result)."""
        view = f"privsyn_merge_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        try:
            metrics = self.spark.sql(f"MERGE INTO {delta_identifier(target)} t USING {view} s ON {condition} "
                                     f"WHEN NOT MATCHED THEN INSERT *")
            metrics.collect()
            return metrics
        finally:
            self.spark.catalog.dropTempView(view)

    def plain_strings(self, df: DataFrame, columns: list[str]) -> DataFrame:
        """``df`` with ``columns`` cast to string: a UDF's string columns carry an explicit collation here
        ("string collate UTF8_BINARY") into the Delta log, which delta-rs cannot read."""
        from pyspark.sql import functions as F

        return df.select(*[F.col(f"`{c}`").cast("string").alias(c) if c in columns else F.col(f"`{c}`")
                           for c in df.columns])
