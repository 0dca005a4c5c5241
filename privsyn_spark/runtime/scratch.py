"""Scratch space of a run (GUM's reliable checkpoints), removed when the run ends unless kept.

Checkpoints go under ``spark.checkpoint.dir`` when the session sets it (a cluster's shared file
system), else under ``<run>/checkpoints``. Spark puts each ``setCheckpointDir`` into a fresh
sub-folder; that sub-folder (and ``<run>/checkpoints`` itself) is deleted through the Hadoop file
system when the synthesis and write are done, whether they succeeded or not.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from privsyn_spark.runtime.locations import has_scheme
from privsyn_spark.runtime.remote import is_connect

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def delete(spark: SparkSession, location: str) -> None:
    """Remove ``location`` (a folder, recursively) through the Hadoop file system; on Spark Connect (no
    JVM here) a local path or ``file:`` URI from this process, and anything else is left with a warning."""
    if is_connect(spark):
        if has_scheme(location) and not location.startswith("file:"):
            log.warning("Spark Connect: %s cannot be removed from the client; delete it on the cluster", location)
            return
        shutil.rmtree(Path(urlparse(location).path if location.startswith("file:") else location),
                      ignore_errors=True)
        return
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(path, True)


@contextmanager
def run_scratch(spark: SparkSession, run_checkpoints: str, keep: bool = False) -> Iterator[str]:
    """Yield the checkpoint folder to use for this run (``spark.checkpoint.dir``, else
    ``run_checkpoints``: a path or URI under the run folder); delete what the run wrote there on exit."""
    shared = spark.conf.get("spark.checkpoint.dir", None)
    root = shared or run_checkpoints
    connect = is_connect(spark)  # the server's checkpoint folder is its own (no SparkContext here)
    before = None if connect else spark.sparkContext.getCheckpointDir()
    try:
        yield root
    finally:
        used = None if connect else spark.sparkContext.getCheckpointDir()
        if keep:
            log.info("keeping the run's checkpoints in %s (--keep-scratch)", used or root)
        else:
            if used and used != before:
                delete(spark, used)  # the sub-folder Spark made when this run set the checkpoint folder
            if not shared:
                delete(spark, root)
