"""Reading input tables (Delta, Parquet, CSV, catalog) and writing Delta tables atomically."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

FORMATS = ("delta", "parquet", "csv", "table")


def is_path(source: str) -> bool:
    """Whether ``source`` names a file-system location (URI, or any path with a '/') rather than a
    catalog table (``db.table``)."""
    return "://" in source or "/" in source or source.startswith((".", "~")) or Path(source).exists()


def detect_format(source: str) -> str:
    """Guess the format: a folder with ``_delta_log`` is Delta; ``.csv[.gz]`` CSV; ``.parquet`` or
    another existing path Parquet; a bare ``db.table`` name a catalog table."""
    lowered = source.lower()
    if not is_path(source):
        return "table"
    if lowered.endswith((".csv", ".csv.gz", ".csv.bz2")):
        return "csv"
    if "://" not in source and (Path(source).expanduser() / "_delta_log").is_dir():
        return "delta"
    return "parquet"


def read_table(spark, source: str, fmt: str | None = None, options: Mapping[str, str] | None = None,
               infer_types: bool = True):
    """Read ``source`` as a DataFrame (lazily). CSV gets a header, and inferred types if ``infer_types``.

    Type inference reads a whole CSV once before the first action; with ``infer_types=False`` every
    column is a string and only the header line is read up front (the pipeline does this: the
    schema declares each column's type and encoding parses the strings against it).
    """
    fmt = fmt or detect_format(source)
    if fmt not in FORMATS:
        raise ValueError(f"unknown input format {fmt!r}; use one of {FORMATS}")
    if fmt == "table":
        return spark.table(source)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true" if infer_types else "false")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    path = str(Path(source).expanduser()) if "://" not in source else source
    log.info("reading %s table %s", fmt, path)
    return reader.load(path)


def write_delta(df, target: str, mode: str = "overwrite", properties: Mapping[str, str] | None = None,
                user_metadata: Mapping[str, object] | None = None) -> int:
    """Write ``df`` as a Delta table (a path or a catalog name) in one atomic commit; return its version.

    A job that fails before the commit leaves the previous version as it was: Delta only makes
    the new files visible when the transaction log entry is written. ``properties`` become table
    properties (a second, metadata-only commit); ``user_metadata`` is stored in the data commit.
    """
    from delta.tables import DeltaTable

    if mode not in ("overwrite", "append"):
        raise ValueError(f"mode must be 'overwrite' or 'append', got {mode!r}")
    spark = df.sparkSession
    writer = df.write.format("delta").mode(mode)
    if mode == "overwrite":
        writer = writer.option("overwriteSchema", "true")
    if user_metadata:
        writer = writer.option("userMetadata", json.dumps(user_metadata, sort_keys=True, default=str))
    if is_path(target):
        target = str(Path(target).expanduser().absolute()) if "://" not in target else target
        writer.save(target)
        table = DeltaTable.forPath(spark, target)
        ref = f"delta.`{target}`"
    else:
        writer.saveAsTable(target)
        table = DeltaTable.forName(spark, target)
        ref = target
    if properties:
        assignments = ", ".join(f"'{k}' = '{_sql_string(v)}'" for k, v in properties.items())
        spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ({assignments})")
    version = int(table.history(1).select("version").first()[0])
    log.info("wrote Delta table %s (version %d, mode %s)", target, version, mode)
    return version


def _sql_string(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("'", "\\'")


def table_properties(spark, target: str) -> dict[str, str]:
    """A Delta table's properties (path or catalog name)."""
    ref = f"delta.`{Path(target).expanduser().absolute()}`" if is_path(target) else target
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {ref}").collect()}
