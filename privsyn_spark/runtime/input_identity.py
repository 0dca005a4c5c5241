"""A run's input identity: what a run id's fingerprint binds on the input side (fingerprinted reuse).

- A table location (a path, a URI or a catalog name) is its own identity (a local path made absolute,
  with the run's scope: :mod:`privsyn_spark.runtime.input_scope`). A Delta table's version is recorded
  beside it (:func:`delta_version`): reusing a run id after the table moved on is allowed, since the
  run measured the version it read, but warned about (:class:`StaleInputWarning`). A partition-scoped
  run is bound to its partition's data files instead (:func:`files_version`): a retry after other
  partitions landed reuses its measurements, one after its own partition changed is refused.
- A DataFrame is ``DataFrame:<hash>`` (:func:`frame_identity`): SHA-256 of its analyzed logical plan as
  ``explain(mode="extended")`` prints it (public on classic and Spark Connect sessions; expression ids,
  which change every time a DataFrame is built, dropped) and of the folders its files lie in
  (``inputFiles()``, partition folders ``col=value`` dropped). Building the same DataFrame again (in
  another session too) gives the same identity; another table, filter, projection or join gives
  another. ``semanticHash()`` is not used: it is a JVM ``hashCode`` (identity hashes of some plan
  nodes, e.g. the file format, differ between processes).

Neither reads a row: the identity is the plan's and the location's, never the values', so refusing a
reuse says nothing about the data. A DataFrame made from local data (pandas, a list of rows) has no
location: its identity is its columns and their types, so two such tables with the same columns are
one input to a run id (docs/operations.md, "Reusing a run id").
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import re
from typing import TYPE_CHECKING

from privsyn_spark.runtime.locations import delta_identifier

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

FRAME_PREFIX = "DataFrame:"
_EXPR_ID = re.compile(r"#\d+L?\b")  # a#12L, count(1)#40L: new ids every time the plan is built
_PLAN_ID = re.compile(r"\bplan_id=\d+")  # Spark Connect's client-side plan ids
_PARTITION_DIR = re.compile(r"/[^/=]+=[^/]*$")


class StaleInputWarning(UserWarning):
    """A run id's measurements were reused although its Delta input has moved to another version."""


def analyzed_plan(df: DataFrame) -> str:
    """The analyzed logical plan section of ``df.explain(mode="extended")`` (its output schema first)."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        df.explain(mode="extended")
    plan = text.getvalue()
    start = plan.find("== Analyzed Logical Plan ==")
    end = plan.find("== Optimized Logical Plan ==")
    return plan[start:end if end > start else None].strip() if start >= 0 else plan.strip()


def file_roots(df: DataFrame) -> list[str]:
    """The folders of the files ``df`` reads (``inputFiles()``), partition folders dropped: the tables'
    locations, not which files or partitions they hold now."""
    roots = set()
    for path in df.inputFiles():
        folder = path.rsplit("/", 1)[0]
        while _PARTITION_DIR.search(folder):
            folder = _PARTITION_DIR.sub("", folder)
        roots.add(folder)
    return sorted(roots)


def frame_identity(df: DataFrame) -> str:
    """``DataFrame:<32 hex>``: the hash of ``df``'s analyzed plan (expression ids dropped) and of the
    folders it reads (module docstring); nothing of its rows."""
    plan = _PLAN_ID.sub("plan_id=", _EXPR_ID.sub("#", analyzed_plan(df)))
    text = plan + "\n" + "\n".join(file_roots(df))
    return FRAME_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:32]


def delta_version(spark: SparkSession, source: str) -> int | None:
    """The current version of the Delta table ``source`` (its latest commit; None when Delta's SQL cannot
    tell: not a Delta table, or a session without Delta's SQL extension)."""
    try:
        row = spark.sql(f"DESCRIBE HISTORY {delta_identifier(source)} LIMIT 1").select("version").head()
    except Exception as err:  # noqa: BLE001 - AnalysisException / Connect errors vary between releases
        log.debug("Delta version of %s unknown (%s)", source, type(err).__name__)
        return None
    return None if row is None else int(row[0])


def files_version(files: list[str]) -> str:
    """What identifies a list of data files (a scoped partition's: SHA-256 of their sorted paths; Delta and
    Spark write every data file under a new name, so another set of files is another input)."""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:32]


def moved_version(held: dict, asked: dict) -> str | None:
    """Why a reuse of measurements fingerprinted ``held`` may be stale for an ask ``asked``: the Delta
    version they were measured on, and the one the input is at now (None when the same or unknown)."""
    before, now = held.get("input_delta_version"), asked.get("input_delta_version")
    if before is None or now is None or before == now:
        return None
    return (f"its measurements are of version {before} of Delta table {asked.get('input')}, which is now at "
            f"version {now}")
