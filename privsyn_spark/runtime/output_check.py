"""Checks of where a run writes, done before any budget is spent: the run id, the output table and the
budget ledger's location.

:func:`check_run_id`, :func:`check_output_path` and :func:`check_ledger_path` need no Spark (the CLI
calls them before the session starts); :func:`check_output_table` reads only a Delta table's metadata
(its transaction log), never its data files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.delta_tables import delta_frame, is_delta_table
from privsyn_spark.runtime.locations import is_path, local_path

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


def check_run_id(run_id: str) -> None:
    """A run id names one folder under the runs folder: no path separators, no ``.``/``..``, no control chars."""
    if not run_id or run_id in (".", "..") or any(c in run_id for c in "/\\") or \
            any(ord(c) < 32 for c in run_id) or run_id != run_id.strip():
        raise UsageError(f"--run-id {run_id!r} is not a safe folder name (no '/', '\\', '..', control "
                         f"characters or surrounding spaces)")


def check_output_path(target: str, mode: str) -> None:
    """Refuse a local output location a Delta write would fail on or damage.

    Refused: a regular file; an existing folder that is not a Delta table but holds files (a Delta
    table would be created among them); a location whose nearest existing folder cannot be written
    (probed by creating and removing a hidden folder there).
    Remote paths and catalog names are left to :func:`check_output_table`.
    """
    path = local_path(target)
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError(f"--output {target}: is a regular file, not a Delta table folder")
    if path.is_dir():
        if not (path / "_delta_log").is_dir() and any(path.iterdir()):
            raise UsageError(f"--output {target}: an existing folder that is not a Delta table and holds files; "
                             f"give a new or empty folder, or an existing Delta table")
        folder = path
    else:
        folder = _nearest_folder(path, f"--output {target}")
    _probe(folder, f"--output {target}")


def check_ledger_path(ledger: str) -> None:
    """Refuse a local ledger location its writes would fail on (before Spark starts, as the output is):
    a regular file, or a folder that cannot be written (the table's and its ``_delta_log``, or, for a
    new ledger, the nearest existing folder). Remote paths and catalog names are left to the write."""
    path = local_path(ledger)
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError(f"--ledger {ledger}: is a regular file, not a Delta table folder")
    log = path / "_delta_log"
    folders = [path, log] if log.is_dir() else [path] if path.is_dir() else \
        [_nearest_folder(path, f"--ledger {ledger}")]
    for folder in folders:
        _probe(folder, f"--ledger {ledger}")


def _nearest_folder(path: Path, what: str) -> Path:
    """The nearest existing folder above ``path`` (where it would be created); UsageError if it is a file."""
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{what}: {folder} is a file, so the folder cannot be created")
    return folder


def _probe(folder: Path, what: str) -> None:
    """UsageError unless a folder can be created (and removed) in ``folder``."""
    try:  # a real probe: permission bits say nothing for root, read-only mounts or /proc
        os.rmdir(tempfile.mkdtemp(prefix=".privsyn-write-check-", dir=folder))
    except OSError as exc:
        raise UsageError(f"{what}: cannot write in {folder} ({exc.strerror or exc})") from None


def check_output_table(spark: SparkSession, target: str, mode: str, ddl: str) -> None:
    """In append mode, an existing output table must have the synthetic table's columns and types.

    ``ddl`` is the synthetic table's Spark DDL (``write.decode.output_ddl``). Only the table's
    metadata is read: the schema of a Delta path comes from its transaction log.
    """
    check_output_path(target, mode)
    if mode != "append":
        return
    from pyspark.sql.types import StructType

    path = local_path(target)
    if path is not None:
        if not (path / "_delta_log").is_dir():
            return
        existing = delta_frame(spark, str(path.absolute())).schema  # the Delta log's schema
    elif is_path(target):
        if not is_delta_table(spark, target):
            return
        existing = delta_frame(spark, target).schema
    else:
        if not spark.catalog.tableExists(target):
            return
        existing = spark.table(target).schema
    wanted = StructType.fromDDL(ddl)
    assert isinstance(existing, StructType) and isinstance(wanted, StructType)
    have = [(f.name, f.dataType.simpleString()) for f in existing.fields]
    need = [(f.name, f.dataType.simpleString()) for f in wanted.fields]
    if have != need:
        differ = [f"{n} {t}" for n, t in need if (n, t) not in have] + \
                 [f"{n} {t} (in the table only)" for n, t in have if (n, t) not in need]
        raise UsageError(f"--output {target}: cannot append, the existing table's columns differ from the "
                         f"schema's: {', '.join(differ) or 'column order'}; use --write-mode overwrite or "
                         f"another output")


def check_locations(source: str, target: str | None, write_mode: str) -> None:
    """Refuse (UsageError), before Spark starts, a local input that does not exist and an output path the
    write would fail on (``target`` None: the step writes nothing)."""
    local = is_path(source) and "://" not in source and not any(c in source for c in "*?[{")
    if local and not Path(source).expanduser().exists():
        raise UsageError(f"--input {source}: no such file or folder")
    if target:
        check_output_path(target, write_mode)
