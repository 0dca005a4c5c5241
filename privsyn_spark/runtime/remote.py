"""What differs on a Spark Connect session (``SparkSession.builder.remote(...)``; Databricks serverless and
shared access mode, any Spark 4 Connect server): it has no ``sparkContext``, no ``DataFrame.rdd`` and no
py4j gateway (``_jvm``). Each caller asks :func:`is_connect` and takes its DataFrame-only path there
(docs/operations.md#spark-connect); classic sessions keep their JVM paths.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_PARALLELISM: dict[int, int] = {}
"""A Connect session's default parallelism, asked once per session object."""


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM on this side), without importing its client."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """``sparkContext.defaultParallelism``; on Spark Connect the partitions of a plain ``spark.range``
    (which Spark splits over the default parallelism), counted by one small job, once per session."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    if id(spark) not in _PARALLELISM:
        from pyspark.sql import functions as F

        parts = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).distinct().count()
        _PARALLELISM[id(spark)] = max(1, int(parts))
    return _PARALLELISM[id(spark)]


class Inline:
    """A broadcast's stand-in on Spark Connect: the value travels inside the UDF that reads it
    (``.value`` as on a Broadcast; at most ``spark.connect.grpc.maxInboundMessageSize``, 128 MiB by default)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def unpersist(self) -> None:
        """Nothing to release (a Broadcast's method)."""


def share(spark: SparkSession, value: Any) -> Any:
    """``value`` for the tasks of ``spark``: a Broadcast on a classic session, :class:`Inline` on Connect."""
    return Inline(value) if is_connect(spark) else spark.sparkContext.broadcast(value)


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


def sum_vectors(df: DataFrame, column: str, groups: int = 16) -> np.ndarray | None:
    """The sum of the int64 vectors (little-endian bytes) in binary ``column`` of ``df`` by DataFrame
    steps only (Spark Connect has no RDD ``treeReduce``), as a two-level tree: each partition sums its
    rows, the partials are shuffled into at most ``groups`` partitions and summed again, and the driver
    adds those few, one at a time. None when ``df`` has no rows."""
    partials = df.select(column).mapInArrow(_summed(0), "v binary")
    total = None
    for row in partials.repartition(groups).mapInArrow(_summed(0), "v binary").toLocalIterator():
        vector = np.frombuffer(row[0], dtype=np.int64)
        total = vector.copy() if total is None else total + vector
    return total
