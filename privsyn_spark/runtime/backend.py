"""What differs between a classic SparkSession and a Spark Connect one (``SparkSession.builder.remote(...)``;
Databricks serverless and shared access mode, any Spark 4 Connect server), behind one adapter.

A Connect session has no ``sparkContext``, no ``DataFrame.rdd`` and no py4j gateway (``_jvm``) on this side.
:func:`backend_of` chooses, once per session, :class:`~privsyn_spark.runtime.backend_classic.ClassicBackend`
(py4j, SparkContext, RDDs, the Hadoop file system, delta-spark) or
:class:`~privsyn_spark.runtime.backend_connect.ConnectBackend` (DataFrame and SQL steps only); callers ask it
for the one operation they need (docs/operations.md#spark-connect).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Protocol

from privsyn_spark.runtime.backend_classic import ClassicBackend
from privsyn_spark.runtime.backend_connect import ConnectBackend

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyspark.sql import DataFrame


class SparkBackend(Protocol):
    """The operations whose implementation depends on the kind of session."""

    name: str
    """``"classic"`` or ``"connect"``."""
    jvm: bool
    """Whether this process drives the session's JVM (py4j: SparkContext, Hadoop FS, jars); False on Connect."""

    def default_parallelism(self) -> int:
        """The session's default parallelism."""

    def broadcast(self, value: Any) -> Any:
        """``value`` for the tasks of the session, read as ``.value`` (released with ``.unpersist()``)."""

    def sum_vectors(self, df: DataFrame, column: str) -> np.ndarray | None:
        """The sum of the int64 vectors (little-endian bytes) in binary ``column`` of ``df``, tree-aggregated
        so only partial sums reach the driver; None when ``df`` has no rows."""

    def sum_vectors_and_peak(self, df: DataFrame, column: str, peak: str) -> tuple[np.ndarray | None, int]:
        """:meth:`sum_vectors` of ``column`` and the largest value of long ``peak`` (0 where it is not gathered)."""

    def master(self) -> str:
        """The session's master URL ('' when a Connect server does not say)."""

    def checkpointed_rdds(self, df: DataFrame) -> set[int]:
        """The ids of the checkpointed RDDs ``df``'s plan reads (its ``LogicalRDD`` leaves); empty on Connect."""

    def release_rdds(self, ids: set[int]) -> None:
        """Unpersist the stored RDDs of ``ids`` (gone ones are skipped); nothing on Connect, whose server
        releases a local checkpoint with its DataFrame."""

    def context_file_system(self, location: str) -> tuple[Any, Any] | None:
        """(Hadoop file system, Path) of ``location`` with the SparkContext's Hadoop configuration; None on Connect."""

    def session_file_system(self, location: str) -> tuple[Any, Any] | None:
        """(Hadoop file system, qualified Path) of ``location`` with the session's Hadoop configuration
        (its SQL conf included); None on Connect."""

    def context_checkpoint_dir(self) -> str | None:
        """The SparkContext's checkpoint folder (None: not set, or Connect, where the server has its own)."""

    def checkpoint_folder(self, requested: str | None) -> str | None:
        """The folder reliable checkpoints go to, after setting ``requested`` where this side can (None: local
        checkpoints only)."""

    def delta_log_version(self, target: str) -> int | None:
        """The latest version of the Delta table at path ``target`` from its log's snapshot (no Spark job);
        None where that cannot be asked (Connect, or a Delta release without that method)."""

    def is_delta_table(self, target: str) -> bool:
        """Whether a Delta table is at the path ``target`` (its log has a first commit)."""

    def delta_frame(self, target: str) -> DataFrame:
        """The Delta table ``target`` (path or name) as a lazy DataFrame."""

    def create_delta_table(self, target: str, ddl: str, comment: str) -> None:
        """Create an empty Delta table of columns ``ddl`` at ``target`` unless one is there."""

    def merge_insert(self, target: str, source: DataFrame, condition: str) -> Any:
        """``MERGE INTO target t USING source s ON condition WHEN NOT MATCHED THEN INSERT *``: its metrics or None."""

    def plain_strings(self, df: DataFrame, columns: list[str]) -> DataFrame:
        """``df`` with its string ``columns`` of a UDF's output as plain strings (no explicit collation)."""


_CHOSEN: weakref.WeakKeyDictionary[Any, SparkBackend] = weakref.WeakKeyDictionary()


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM on this side), without importing its client."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def backend_of(spark: Any) -> SparkBackend:
    """The backend of the session ``spark``, chosen once per session."""
    chosen = _CHOSEN.get(spark)
    if chosen is None:
        chosen = ConnectBackend(spark) if is_connect(spark) else ClassicBackend(spark)
        _CHOSEN[spark] = chosen
    return chosen
