"""Writing the synthetic table as Delta with its provenance, and reading that provenance back.

A synthetic table is written in one Delta commit that carries its provenance. A partition-scoped run
(``partition``: the run's ``--partition`` values) adds the values to every row as literals and
replaces exactly that partition (Delta ``replaceWhere``, the DataFrameWriterV2's ``overwrite(condition)``):
every other partition's files stay as they were, a rerun or a backfill of the partition replaces
only it, and the table is created partitioned by those columns on the first run. On create/overwrite
(``CREATE OR REPLACE TABLE ... AS SELECT`` through the DataFrameWriterV2) the data, the table
properties, the comment and the partitioning are one commit (version 0 already has them); every
commit, appends included, carries the run's record as its ``userMetadata`` (JSON), which
:func:`provenance` lists per version.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime import delta_rs
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.delta_tables import delta_frame, is_delta_table
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.locations import delta_identifier, is_path
from privsyn_spark.write.failed_write import cleaned_on_failure

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

WRITE_MODES = ("error", "overwrite", "append")
"""How a run writes its table: ``error`` (the default) refuses a table (or partition) that holds rows."""


def check_partition_mode(mode: str, partition: Sequence[tuple[str, str]]) -> None:
    """Refuse an append into a run's scoped partition: the write replaces that partition (replaceWhere),
    an append would add it again on every rerun (the one home of this rule)."""
    if partition and mode == "append":
        raise UsageError("--partition replaces its partition of --output (replaceWhere): --mode append "
                         "is refused (a rerun would add the partition again)")


def warm_write(spark: SparkSession, folder: str) -> None:
    """A 1-row Delta table into ``folder`` by the output's own path (``createOrReplace``): the session's
    one-time Delta cost, paid while the driver estimates (:mod:`privsyn_spark.runtime.warmup`)."""
    spark.range(1).writeTo(delta_identifier(folder)).using("delta").createOrReplace()


def write_delta(df: DataFrame, target: str, mode: str = "error", properties: Mapping[str, str] | None = None,
                user_metadata: Mapping[str, object] | None = None, partition_by: Sequence[str] = (),
                comment: str | None = None, partition: Sequence[tuple[str, str]] = (),
                partition_types: Mapping[str, str] | None = None) -> int:
    """Write ``df`` as a Delta table (a path or a catalog name) in one atomic commit; return its version.

    ``error`` (the default, as Spark's and Delta's) refuses a table that holds rows (:func:`check_mode`)
    and otherwise writes as ``overwrite``; ``overwrite`` (or a table that does not exist yet) replaces
    the table, its ``properties``, its ``comment`` and its partitioning (``partition_by``) in that one
    commit; ``append`` adds rows to an existing table and keeps its properties, comment and
    partitioning (a ``partition_by`` that differs is refused). ``user_metadata`` is the commit's
    ``userMetadata`` (JSON) either way. A job that fails before the commit leaves the previous version
    as it was. ``partition``: replace only that partition (module docstring; its values typed as the
    table's columns, else ``partition_types``; ``error`` refuses a partition that holds rows).
    """
    if mode not in WRITE_MODES:
        raise UsageError(f"mode must be one of {', '.join(WRITE_MODES)}, got {mode!r}")
    spark = df.sparkSession
    ident = delta_identifier(target)
    metadata = json.dumps(dict(user_metadata or {}), sort_keys=True, default=str)
    exists = table_exists(spark, target)
    if exists and mode == "error":
        check_mode(spark, target, mode, partition, partition_types or {})
    with cleaned_on_failure(spark, target):  # a failed write's data files do not stay in the folder
        version = _write(df, target, exists, mode, ident, metadata, properties, partition_by, comment, partition,
                         partition_types or {})
    log.info("wrote Delta table %s (version %d, mode %s%s)", target, version, mode,
             f", partition {', '.join(f'{c}={v}' for c, v in partition)}" if partition else "")
    return version


def _write(df: DataFrame, target: str, exists: bool, mode: str, ident: str, metadata: str,
           properties: Mapping[str, str] | None, partition_by: Sequence[str], comment: str | None,
           partition: Sequence[tuple[str, str]], partition_types: Mapping[str, str]) -> int:
    """:func:`write_delta`'s commit, its mode checked; returns the new version."""
    spark = df.sparkSession
    check_partition_mode(mode, partition)
    if partition:
        df, predicate = _with_partition(df, target, exists, partition, partition_types)
        partition_by = tuple(partition_by) or tuple(c for c, _ in partition)
        if not exists:
            _create_empty(df, ident, properties, partition_by, comment)
        df.writeTo(ident).option("userMetadata", metadata).overwrite(_expr(predicate))
        return latest_version(spark, target)
    if mode == "append" and exists:
        current = list(spark.sql(f"DESCRIBE DETAIL {ident}").select("partitionColumns").head(1)[0][0])
        if partition_by and list(partition_by) != current:
            raise UsageError(f"{target} is partitioned by {current or 'nothing'}; an append cannot partition it "
                             f"by {list(partition_by)}")
        df.writeTo(ident).option("userMetadata", metadata).append()
    else:
        from pyspark.sql import functions as F

        writer = df.writeTo(ident).using("delta").option("userMetadata", metadata)
        for key, value in (properties or {}).items():
            writer = writer.tableProperty(key, str(value))
        if comment is not None:
            writer = writer.tableProperty("comment", comment)
        if partition_by:
            writer = writer.partitionedBy(*[F.col(f"`{c}`") for c in partition_by])
        writer.createOrReplace()
    return latest_version(spark, target)


def check_mode(spark: SparkSession, target: str, mode: str, partition: Sequence[tuple[str, str]] = (),
               partition_types: Mapping[str, str] | None = None) -> None:
    """Refuse (UsageError) to write in mode ``error`` over a table that holds rows (with ``partition``:
    rows in that partition), as Spark's and Delta's error-if-exists default does. Reads at most one row
    of the output table (synthetic data, not the private input)."""
    if mode != "error" or not table_exists(spark, target):
        return
    rows, where = delta_frame(spark, target), ""
    if partition:
        types = partition_column_types(spark, target, partition, partition_types or {})
        predicate = Scope(tuple(partition)).sql_predicate(types)
        rows, where = rows.where(predicate), f" in partition {', '.join(f'{c}={v}' for c, v in partition)}"
    if rows.limit(1).count():
        raise UsageError(f"--output {target} already holds rows{where}: pass --mode overwrite to replace "
                         f"{'that partition' if partition else 'the table'} or --mode append to add to it "
                         f"(API: mode='overwrite' / 'append'); the default refuses, as Spark's and Delta's do")


def _with_partition(df: DataFrame, target: str, exists: bool, partition: Sequence[tuple[str, str]],
                    types: Mapping[str, str]) -> tuple[DataFrame, str]:
    """``df`` with the partition values as typed literal columns, and the replaceWhere predicate."""
    from pyspark.sql import functions as F


    types = partition_column_types(df.sparkSession, target if exists else None, partition, types)
    clash = [c for c, _ in partition if c in df.columns]
    if clash:
        raise UsageError(f"partition column {clash[0]!r} is a synthesized column too; remove it from the schema")
    df = df.select(*[F.col(f"`{c}`") for c in df.columns],
                   *[F.lit(v).cast(types[c]).alias(c) for c, v in partition])
    return df, Scope(tuple(partition)).sql_predicate(types)


def partition_column_types(spark: SparkSession, target: str | None, partition: Sequence[tuple[str, str]],
                           types: Mapping[str, str]) -> dict[str, str]:
    """The SQL type of each partition column: the existing table's (``target``; its metadata only),
    else ``types``, else ``string``."""
    if target is not None:  # the Delta log's schema (no data file is read)
        types = {**types, **{f.name: f.dataType.simpleString() for f in delta_frame(spark, target).schema.fields}}
    return {c: types.get(c, "string") for c, _ in partition}


def _expr(predicate: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(predicate)


def _create_empty(df: DataFrame, ident: str, properties: Mapping[str, str] | None, partition_by: Sequence[str],
                  comment: str | None) -> None:
    """Create the table empty (version 0: columns, partitioning, properties), so that every partition is
    then written by its own replaceWhere commit with its run's provenance; a table another run created
    meanwhile is used as it is."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    writer = df.sparkSession.createDataFrame([], df.schema).writeTo(ident).using("delta")
    for key, value in (properties or {}).items():
        writer = writer.tableProperty(key, str(value))
    if comment is not None:
        writer = writer.tableProperty("comment", comment)
    try:
        writer.partitionedBy(*[F.col(f"`{c}`") for c in partition_by]).create()
    except AnalysisException as err:
        if "already exists" not in str(err).lower() and "ALREADY_EXISTS" not in str(err):
            raise


def table_exists(spark: SparkSession, target: str) -> bool:
    """Whether a Delta table exists at ``target`` (a path or a catalog name)."""
    return is_delta_table(spark, target) if is_path(target) else bool(spark.catalog.tableExists(target))


def latest_version(spark: SparkSession, target: str) -> int:
    """The latest version of a Delta table: for a path, from the Delta log's snapshot (which the
    session's own commit just updated; no Spark job), else (a catalog name, Spark Connect, or a Delta
    without that method) from its history, a job reading the log."""
    snapshot = backend_of(spark).delta_log_version(target) if is_path(target) else None
    if snapshot is not None:
        return snapshot
    return int(spark.sql(f"DESCRIBE HISTORY {delta_identifier(target)} LIMIT 1").select("version").head(1)[0][0])


def table_properties(spark: SparkSession, target: str) -> dict[str, str]:
    """A Delta table's properties (path or catalog name)."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {delta_identifier(target)}").collect()}


def provenance(spark: SparkSession, target: str) -> list[dict[str, Any]]:
    """Every version of a Delta table, newest first: version, timestamp, operation and the commit's
    ``userMetadata`` (the run record privsyn-spark writes: run id, epsilon, delta, rho, ...; parsed
    from JSON, ``None`` for commits of other writers). Reads the table's history only, not its rows."""
    rows = spark.sql(f"DESCRIBE HISTORY {delta_identifier(target)}").select(
        "version", "timestamp", "operation", "userMetadata").collect()
    return _entries([r.asDict() for r in rows])


def local_provenance(target: str) -> list[dict[str, Any]] | None:
    """:func:`provenance` of a local path table read from its Delta log with delta-rs, without Spark; None
    when Spark must read it (:mod:`~privsyn_spark.runtime.delta_rs`)."""
    try:
        commits = delta_rs.history(target)
    except FileNotFoundError:
        raise UsageError(f"{target}: no Delta table there (no _delta_log with a commit)") from None
    return None if commits is None else _entries(commits)


def _entries(commits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The provenance entries of a table's commits (version, timestamp, operation, userMetadata)."""
    out = []
    for r in commits:
        try:
            record = json.loads(r["userMetadata"]) if r["userMetadata"] else None
        except ValueError:
            record = {"userMetadata": r["userMetadata"]}
        out.append({"version": int(r["version"]), "timestamp": str(r["timestamp"]),
                    "operation": r["operation"], "run": record})
    return out
