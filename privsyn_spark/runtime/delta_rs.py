"""A local Delta table read without Spark, through delta-rs (the ``deltalake`` package): its rows, its
history, and what is wrong with a damaged transaction log.

What reads a few KB (``budget show``/``budget check``, ``provenance``) needs no JVM: a local path (or a
``file:`` URI) is read here in well under a second. Every other location (``s3a://``, ``abfss://``, a
catalog name) keeps Spark, whose Hadoop settings and credentials are the ones the runs use, as does a
local log delta-rs cannot read but Spark may (an unreadable checkpoint Spark replays around): those
functions return None and the caller reads with Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from privsyn_spark.runtime.locations import local_path

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


def _delta_rs() -> Any:
    """The ``deltalake`` module, or None when it is not installed (then Spark reads)."""
    try:
        import deltalake
    except ImportError:
        return None
    return deltalake


def log_versions(folder: Path) -> tuple[list[int], list[int]]:
    """The commit and checkpoint versions in ``folder/_delta_log`` (empty lists when there is none)."""
    log = folder / "_delta_log"
    names = [p.name for p in log.iterdir() if p.is_file()] if log.is_dir() else []
    commits = sorted(int(m.group(1)) for m in map(_COMMIT.match, names) if m)
    checkpoints = sorted({int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m})
    return commits, checkpoints


def has_log(folder: Path) -> bool:
    """Whether a Delta log with at least one commit or checkpoint is in ``folder``."""
    commits, checkpoints = log_versions(folder)
    return bool(commits or checkpoints)


def missing_versions(folder: Path) -> str | None:
    """``versions 21-23 missing`` when the log in ``folder`` has a gap after its last checkpoint (or,
    without one, after version 0), the versions a reader needs to rebuild the table; None when whole."""
    commits, checkpoints = log_versions(folder)
    if not commits:
        return None
    last_checkpoint = checkpoints[-1] if checkpoints else -1
    have = set(commits)
    gaps = [v for v in range(last_checkpoint + 1, commits[-1] + 1) if v not in have]
    if not gaps:
        return None
    runs: list[list[int]] = []
    for v in gaps:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    spans = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
    return f"version{'s' if len(gaps) > 1 else ''} {spans} missing"


def read_rows(target: str) -> list[dict[str, Any]] | None:
    """Every row of the local Delta table ``target`` as dicts (timestamps as naive local times, as Spark
    returns them); None when Spark must read it (module docstring). Raises FileNotFoundError when no
    Delta log is there."""
    rows = _read(target, _table_rows)
    return None if rows is None else [{k: _naive(v) for k, v in row.items()} for row in rows]


def _table_rows(table: Any) -> list[dict[str, Any]] | None:
    """The rows of the current snapshot's data files, read by pyarrow (delta-rs's own scan, its query
    engine, can abort the interpreter at exit); None for what that misses (partition values kept in
    the log, deletion vectors): Spark reads those."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = table.protocol().reader_features or []
    if table.metadata().partition_columns or "deletionVectors" in features:
        return None
    files = [local_path(unquote(uri)) for uri in table.file_uris()]
    if None in files:
        return None
    if not files:
        return []
    parts = [pq.read_table(str(f)) for f in files]  # one by one: files from before a schema merge lack columns
    return pa.concat_tables(parts, promote_options="default").to_pylist()


def history(target: str) -> list[dict[str, Any]] | None:
    """The commits of the local Delta table ``target``, newest first: version, timestamp (as Spark's
    ``DESCRIBE HISTORY`` gives it), operation, userMetadata; None when Spark must read it."""
    commits = _read(target, lambda table: table.history())
    if commits is None:
        return None
    entries = sorted(commits, key=lambda c: -int(c["version"]))
    return [{"version": int(c["version"]), "timestamp": datetime.fromtimestamp(int(c["timestamp"]) / 1000),
             "operation": c.get("operation"), "userMetadata": c.get("userMetadata")} for c in entries]


def _read(target: str, read: Callable[[Any], Any]) -> Any:
    """``read(table)`` of delta-rs's ``DeltaTable`` of a local ``target`` (module docstring for None)."""
    folder = local_path(target)
    deltalake = _delta_rs()
    if folder is None or deltalake is None:
        return None
    if not has_log(folder):
        raise FileNotFoundError(f"no Delta table at {target}")
    try:
        return read(deltalake.DeltaTable(str(folder.absolute())))
    except Exception:  # noqa: BLE001 - delta-rs cannot read this log (Spark may): Spark reads it
        return None


def _naive(value: Any) -> Any:
    """A timezone-aware datetime as the naive local time Spark's ``collect`` gives."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value
