"""Reading input tables (Delta, Parquet, CSV, catalog) and writing Delta tables with their provenance.

Formats are detected by asking the file system through Spark's Hadoop FS, so a Delta table is
recognised at every URI Spark reads (local paths, ``file://``, ``s3a://``, ``hdfs://``, ``abfss://``,
...): a ``_delta_log`` folder at the location means Delta. Reading a Delta table's files as plain
Parquet would mix in old versions and deleted rows, so it is refused.

A synthetic table is written in one Delta commit that carries its provenance: on create/overwrite
(``CREATE OR REPLACE TABLE ... AS SELECT`` through the DataFrameWriterV2) the data, the table
properties, the comment and the partitioning are one commit (version 0 already has them); every
commit, appends included, carries the run's record as its ``userMetadata`` (JSON), which
:func:`provenance` lists per version.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from privsyn_spark.errors import UsageError

log = logging.getLogger(__name__)

FORMATS = ("delta", "parquet", "csv", "table")
DELTA_LOG = "_delta_log"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # file:, s3a://, hdfs://, abfss://, ... (not C:)


def has_scheme(source: str) -> bool:
    """Whether ``source`` is a URI (``scheme:...``) rather than a local path or a table name."""
    return bool(_SCHEME.match(source))


def is_path(source: str) -> bool:
    """Whether ``source`` names a file-system location (URI, or any path with a '/') rather than a
    catalog table (``db.table``)."""
    return has_scheme(source) or "/" in source or source.startswith((".", "~")) or Path(source).exists()


def location(source: str) -> str:
    """A path as Spark should see it: URIs as they are, local paths absolute with ``~`` expanded."""
    return source if has_scheme(source) else str(Path(source).expanduser().absolute())


def _qualified_path(spark, source: str):
    """(file system, fully qualified Hadoop Path) of ``source``, with the session's Hadoop configuration."""
    path = spark._jvm.org.apache.hadoop.fs.Path(location(source))
    fs = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    return fs, fs.makeQualified(path)


def delta_root(spark, source: str) -> str | None:
    """The Delta table ``source`` is or lies inside (the nearest folder with a ``_delta_log``), or None."""
    return _delta_root(spark, source)[0]


def _delta_root(spark, source: str) -> tuple[str | None, bool]:
    """(the Delta table at or above ``source``, whether it is ``source`` itself)."""
    if getattr(spark, "_jvm", None) is None:  # Spark Connect: no Hadoop FS on this side; ask Delta
        from delta.tables import DeltaTable

        return (location(source), True) if DeltaTable.isDeltaTable(spark, location(source)) else (None, False)
    from py4j.protocol import Py4JJavaError

    fs, path = _qualified_path(spark, source)
    if fs.exists(spark._jvm.org.apache.hadoop.fs.Path(path, DELTA_LOG)):
        return str(path.toString()), True
    path = path.getParent()
    while path is not None:  # a folder or file inside a table (ancestors we may not list end the search)
        try:
            if fs.exists(spark._jvm.org.apache.hadoop.fs.Path(path, DELTA_LOG)):
                return str(path.toString()), False
        except Py4JJavaError:
            break
        path = path.getParent()
    return None, False


def detect_format(spark, source: str) -> str:
    """The format of ``source``: a location with a ``_delta_log`` folder is Delta (any URI scheme,
    asked through Spark's Hadoop FS); ``.csv[.gz|.bz2]`` CSV; any other location Parquet; a bare
    ``db.table`` name a catalog table."""
    return _format(source, delta_root(spark, source) if is_path(source) else None)


def _format(source: str, root: str | None) -> str:
    if not is_path(source):
        return "table"
    if root is not None:
        return "delta"
    return "csv" if source.lower().endswith((".csv", ".csv.gz", ".csv.bz2")) else "parquet"


def read_table(spark, source: str, fmt: str | None = None, options: Mapping[str, str] | None = None,
               infer_types: bool = True):
    """Read ``source`` as a DataFrame (lazily). CSV gets a header, and inferred types if ``infer_types``.

    Type inference reads a whole CSV once before the first action; with ``infer_types=False`` every
    column is a string and only the header line is read up front (the pipeline does this: the
    schema declares each column's type and encoding parses the strings against it).

    Raises UsageError for an unknown format, for a Delta table's files read as Parquet/CSV (they
    include old versions and deleted rows), and for a location inside a Delta table.
    """
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown input format {fmt!r}; use one of {FORMATS}")
    root, itself = _delta_root(spark, source) if is_path(source) and fmt != "table" else (None, False)
    fmt = fmt or _format(source, root)
    if fmt == "table":
        return spark.table(source)
    if root is not None and fmt != "delta":
        raise UsageError(f"{source} is (inside) the Delta table {root}: its files hold old versions and deleted "
                         f"rows, so it cannot be read as {fmt}; read it as delta (--input-format delta)")
    if root is not None and not itself:
        raise UsageError(f"{source} lies inside the Delta table {root}: read the table itself")
    path = location(source)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true" if infer_types else "false")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    log.info("reading %s table %s", fmt, path)
    return reader.load(path)


def delta_identifier(target: str) -> str:
    """The SQL identifier of a Delta table: ``delta.`<location>``` for a path, the name otherwise."""
    if is_path(target):
        return "delta.`" + location(target).replace("`", "``") + "`"
    return target


def write_delta(df, target: str, mode: str = "overwrite", properties: Mapping[str, str] | None = None,
                user_metadata: Mapping[str, object] | None = None, partition_by: Sequence[str] = (),
                comment: str | None = None) -> int:
    """Write ``df`` as a Delta table (a path or a catalog name) in one atomic commit; return its version.

    ``overwrite`` (or a table that does not exist yet) replaces the table, its ``properties``, its
    ``comment`` and its partitioning (``partition_by``) in that one commit; ``append`` adds rows to an
    existing table and keeps its properties, comment and partitioning (a ``partition_by`` that
    differs is refused). ``user_metadata`` is the commit's ``userMetadata`` (JSON) either way. A job
    that fails before the commit leaves the previous version as it was.
    """
    from delta.tables import DeltaTable

    if mode not in ("overwrite", "append"):
        raise UsageError(f"mode must be 'overwrite' or 'append', got {mode!r}")
    spark = df.sparkSession
    ident = delta_identifier(target)
    metadata = json.dumps(dict(user_metadata or {}), sort_keys=True, default=str)
    exists = (DeltaTable.isDeltaTable(spark, location(target)) if is_path(target)
              else spark.catalog.tableExists(target))
    if mode == "append" and exists:
        table = DeltaTable.forPath(spark, location(target)) if is_path(target) else DeltaTable.forName(spark, target)
        current = list(table.detail().select("partitionColumns").first()[0])
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
        table = DeltaTable.forPath(spark, location(target)) if is_path(target) else DeltaTable.forName(spark, target)
    version = int(table.history(1).select("version").first()[0])
    log.info("wrote Delta table %s (version %d, mode %s)", target, version, mode)
    return version


def table_properties(spark, target: str) -> dict[str, str]:
    """A Delta table's properties (path or catalog name)."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {delta_identifier(target)}").collect()}


def provenance(spark, target: str) -> list[dict[str, object]]:
    """Every version of a Delta table, newest first: version, timestamp, operation and the commit's
    ``userMetadata`` (the run record privsyn-spark writes: run id, epsilon, delta, rho, ...; parsed
    from JSON, ``None`` for commits of other writers). Reads the table's history only, not its rows."""
    rows = spark.sql(f"DESCRIBE HISTORY {delta_identifier(target)}").select(
        "version", "timestamp", "operation", "userMetadata").collect()
    out = []
    for r in rows:
        try:
            record = json.loads(r["userMetadata"]) if r["userMetadata"] else None
        except ValueError:
            record = {"userMetadata": r["userMetadata"]}
        out.append({"version": int(r["version"]), "timestamp": str(r["timestamp"]),
                    "operation": r["operation"], "run": record})
    return out
