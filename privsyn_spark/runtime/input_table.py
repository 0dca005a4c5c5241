"""Reading the input table (Delta, Parquet, CSV, catalog) as a lazy DataFrame.

Formats are detected by asking the file system through Spark's Hadoop FS, so a Delta table is
recognised at every URI Spark reads (local paths, ``file://``, ``s3a://``, ``hdfs://``, ``abfss://``,
...): a ``_delta_log`` folder at the location means Delta. Reading a Delta table's files as plain
Parquet would mix in old versions and deleted rows, so it is refused.

Writing the synthetic table is :mod:`privsyn_spark.write.delta_output`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import BadInputData, UsageError
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.delta_tables import is_delta_table
from privsyn_spark.runtime.locations import is_path, location

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FORMATS = ("delta", "parquet", "csv", "table")
DELTA_LOG = "_delta_log"


def _hadoop_path(spark: SparkSession, *args: Any) -> Any:
    """``org.apache.hadoop.fs.Path(*args)`` in the session's JVM (a classic session: Spark Connect has none here)."""
    jvm: Any = spark._jvm
    return jvm.org.apache.hadoop.fs.Path(*args)


def delta_root(spark: SparkSession, source: str) -> str | None:
    """The Delta table ``source`` is or lies inside (the nearest folder with a ``_delta_log``), or None."""
    return _delta_root(spark, source)[0]


def _delta_root(spark: SparkSession, source: str) -> tuple[str | None, bool]:
    """(the Delta table at or above ``source``, whether it is ``source`` itself)."""
    found = backend_of(spark).session_file_system(location(source))
    if found is None:  # no Hadoop FS on this side (Spark Connect); ask Delta
        return (location(source), True) if is_delta_table(spark, source) else (None, False)
    from py4j.protocol import Py4JJavaError

    fs, path = found
    if fs.exists(_hadoop_path(spark, path, DELTA_LOG)):
        return str(path.toString()), True
    path = path.getParent()
    while path is not None:  # a folder or file inside a table (ancestors we may not list end the search)
        try:
            if fs.exists(_hadoop_path(spark, path, DELTA_LOG)):
                return str(path.toString()), False
        except Py4JJavaError:
            break
        path = path.getParent()
    return None, False


def _format(source: str, root: str | None) -> str:
    if not is_path(source):
        return "table"
    if root is not None:
        return "delta"
    return "csv" if source.lower().endswith((".csv", ".csv.gz", ".csv.bz2")) else "parquet"


def read_table(spark: SparkSession, source: str, fmt: str | None = None, options: Mapping[str, str] | None = None,
               infer_types: bool = True) -> Any:
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
        try:
            return spark.table(source)
        except Exception as err:  # pyspark's AnalysisException
            _missing(source, err)
            raise
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
    try:
        return reader.load(path)
    except Exception as err:  # pyspark's AnalysisException; its message names the column, not a value
        if "COLUMN_ALREADY_EXISTS" in str(err):
            raise BadInputData(f"{source}: the table has two columns of the same name (Spark compares names "
                               f"ignoring case): {str(err).splitlines()[0]}") from None
        _missing(source, err)
        raise


MISSING = ("PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND")
"""Spark's error classes of a location or table that does not exist."""


def _missing(source: str, err: Exception) -> None:
    """A missing location or table as a one-line UsageError (exit 2, like a missing local path: a retry
    fails the same way), naming it; other errors pass."""
    if any(name in str(err) for name in MISSING):
        kind = "no such table" if not is_path(source) else "no such file or folder"
        raise UsageError(f"{source}: {kind} ({str(err).splitlines()[0]})") from None


def input_version(spark: SparkSession, source: str, fmt: str | None = None) -> str | None:
    """What identifies the files of a CSV or Parquet input (SHA-256 of each data file's relative path and
    modification time, never its size: nothing about the rows), so a run id measured on them is not
    reused after they changed. None for a Delta or catalog table (a run is bound to the table; a retry
    reuses the measurements of the version it read) and where the file system cannot be asked."""
    import hashlib

    if not is_path(source) or fmt in ("delta", "table"):
        return None
    try:
        found = backend_of(spark).session_file_system(location(source))
        if found is None or delta_root(spark, source) is not None:  # None: Spark Connect, no file system here
            return None
        fs, root = found
        files = fs.listFiles(root, True)
        entries = []
        base = str(root.toString())
        while files.hasNext():
            status = files.next()
            path = str(status.getPath().toString())
            name = path.rsplit("/", 1)[-1]
            if name.startswith(("_", ".")):
                continue
            entries.append(f"{path[len(base):]}\t{status.getModificationTime()}")
    except Exception:  # noqa: BLE001 - a store that cannot list: no version, the path alone binds the run
        return None
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()[:32]
