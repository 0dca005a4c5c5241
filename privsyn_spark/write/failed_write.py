"""What a failed write of the synthetic table leaves behind, removed: its data files.

A Delta write puts its data files into the table's folder and then commits them; when it fails
before the commit (a full disk, SIGTERM, Ctrl-C, a lost executor) the files its tasks wrote stay
there, referenced by no version. :func:`cleaned_on_failure` runs the write's jobs in a job group of
their own; on failure it cancels that group, waits for its tasks to end (so that their executor
traces are printed before the caller's one-line error), and deletes every data file that appeared in
the folder during the write and that the table's current version does not reference. Files of
earlier versions (time travel) are never touched. Classic sessions and path tables only (a Connect
server or a catalog's managed table keeps its own files); a concurrent writer of the same table may
lose its in-flight files, so the pipeline writes a table (partition) from one run at a time.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.delta_tables import delta_frame, is_delta_table
from privsyn_spark.runtime.locations import is_path, location

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SETTLE_SECONDS = 30.0
"""How long a failed write waits for its cancelled tasks to end before it cleans up."""
_GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def cleaned_on_failure(spark: SparkSession, target: str) -> Iterator[None]:
    """Run a write of ``target``; if it raises (or is interrupted), remove the data files it left (module
    docstring) and re-raise."""
    found = backend_of(spark).context_file_system(location(target)) if is_path(target) else None
    if found is None:  # a catalog table, or Spark Connect (no Hadoop file system here)
        yield
        return
    fs, root = found
    before = _data_files(fs, root)
    sc = spark.sparkContext
    saved = {key: sc.getLocalProperty(key) for key in _GROUP_KEYS}
    group = f"privsyn-write-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, f"privsyn-spark: write {target}", interruptOnCancel=True)
    try:
        yield
    except BaseException:
        _settle(sc, group)
        _remove_unreferenced(spark, target, fs, root, before)
        raise
    finally:
        for key, value in saved.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]  # None clears it


def _data_files(fs: Any, root: Any) -> dict[str, Any]:
    """The files under ``root``, its Delta log aside: decoded path -> Hadoop Path."""
    if not fs.exists(root):
        return {}
    found, files = {}, fs.listFiles(root, True)
    while files.hasNext():
        file = files.next().getPath()
        path = _path_of(file.toUri().toString())
        if "/_delta_log/" not in path:
            found[path] = file
    return found


def _path_of(uri: str) -> str:
    """A file URI (``file:/a/b``, ``s3a://bucket/a%20b``) as its decoded path, for comparing listings."""
    return unquote(urlparse(uri).path)


def _settle(sc: Any, group: str) -> None:
    """Cancel the write's jobs and wait (at most :data:`SETTLE_SECONDS`) until none of their tasks runs."""
    sc.cancelJobGroup(group)
    tracker, deadline = sc.statusTracker(), time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        running = [j for j in tracker.getJobIdsForGroup(group)
                   if (info := tracker.getJobInfo(j)) is not None and info.status == "RUNNING"]
        busy = [s for s in tracker.getActiveStageIds()
                if (stage := tracker.getStageInfo(s)) is not None and stage.numActiveTasks > 0]
        if not running and not busy:
            return
        time.sleep(0.2)


def _remove_unreferenced(spark: SparkSession, target: str, fs: Any, root: Any, before: dict[str, Any]) -> None:
    """Delete the files that appeared under ``root`` since ``before`` and that no current version references."""
    try:
        now = _data_files(fs, root)
        new = set(now) - set(before)
        referenced = {_path_of(f) for f in delta_frame(spark, target).inputFiles()} \
            if new and is_delta_table(spark, target) else set()
        left = sorted(new - referenced)
        for path in left:
            fs.delete(now[path], False)
    except Exception as err:  # noqa: BLE001 - the write's own error matters more; say what could not be cleaned
        log.warning("the failed write may have left data files in %s (%s)", target, type(err).__name__)
        return
    if left:
        log.warning("removed %d data file(s) the failed write left in %s", len(left), target)
