"""Scratch space of a run (GUM's reliable checkpoints), removed when the run ends unless kept.

Checkpoints go under ``spark.checkpoint.dir`` when the session sets it (a cluster's shared file
system), else under ``<run>/checkpoints/<host>-<pid>-<random>``: a folder of this process's own, so
that two processes sampling one run at once never delete each other's. Spark puts each
``setCheckpointDir`` into a fresh sub-folder; that sub-folder and this process's folder are deleted
through the Hadoop file system when the synthesis and write are done, whether they succeeded or not,
and ``<run>/checkpoints`` with them once no other process's folder is left in it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.locations import has_scheme
from privsyn_spark.runtime.storage import join

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def _client_path(location: str) -> Path | None:
    """On Spark Connect, ``location`` as a path of this process (None: only the cluster reaches it)."""
    if has_scheme(location) and not location.startswith("file:"):
        return None
    return Path(urlparse(location).path if location.startswith("file:") else location)


def delete(spark: SparkSession, location: str) -> None:
    """Remove ``location`` (a folder, recursively) through the Hadoop file system; on Spark Connect (no
    JVM here) a local path or ``file:`` URI from this process, and anything else is left with a warning."""
    found = backend_of(spark).context_file_system(location)
    if found is not None:
        fs, path = found
        fs.delete(path, True)
        return
    local = _client_path(location)
    if local is None:
        log.warning("Spark Connect: %s cannot be removed from the client; delete it on the cluster", location)
        return
    shutil.rmtree(local, ignore_errors=True)


def delete_if_empty(spark: SparkSession, location: str) -> None:
    """Remove the folder ``location`` if it exists and holds nothing (another process may still use it)."""
    found = backend_of(spark).context_file_system(location)
    if found is None:  # Spark Connect: only a folder of this process
        local = _client_path(location)
        if local is not None:
            with suppress(OSError):
                local.rmdir()
        return
    fs, path = found
    try:
        if fs.exists(path) and len(fs.listStatus(path)) == 0:
            fs.delete(path, False)
    except Exception:  # noqa: BLE001 - another process made its folder there meanwhile: the folder is kept
        log.debug("%s is in use by another process: kept", location)


def own_folder(parent: str) -> str:
    """A sub-folder of ``parent`` no other process uses: ``<host>-<pid>-<random>``."""
    return join(parent, f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@contextmanager
def run_scratch(spark: SparkSession, run_checkpoints: str, keep: bool = False) -> Iterator[str]:
    """Yield the checkpoint folder to use for this run (``spark.checkpoint.dir``, else this process's own
    folder under ``run_checkpoints``: a path or URI under the run folder); delete what it wrote on exit."""
    shared = spark.conf.get("spark.checkpoint.dir", None)
    root = shared or own_folder(run_checkpoints)
    backend = backend_of(spark)
    before = backend.context_checkpoint_dir()
    try:
        yield root
    finally:
        used = backend.context_checkpoint_dir()
        if keep:
            log.info("keeping the run's checkpoints in %s (--keep-scratch)", used or root)
        else:
            if used and used != before:
                delete(spark, used)  # the sub-folder Spark made when this run set the checkpoint folder
            if not shared:
                delete(spark, root)
                delete_if_empty(spark, run_checkpoints)
