"""Before a fit reads anything: can this session run the pipeline? One line with the fix when it cannot.

A session the caller built (a notebook, a job, Databricks, Spark Connect) has prerequisites the pipeline
cannot set for it: its Python workers must import this package (else the first Spark job dies after
its retries with a long worker trace), and the ledger needs Delta Lake on the session. :func:`preflight`
checks both once per session, before any budget is reserved: the worker check is a one-task job of
one row that imports the package in a Python worker and returns its version (nothing is read).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.pyspark_check import check_pyspark
from privsyn_spark.runtime.session import delta_help, has_delta
from privsyn_spark.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_CHECKED: set[int] = set()
"""Sessions (by id) whose workers passed the check in this process."""
_FIX = ("install privsyn-spark where the workers run (their Python: PYSPARK_PYTHON, or the cluster's; "
        "on Databricks a cluster library or %pip install privsyn-spark), or ship it to the session "
        "(sparkContext.addPyFile / spark.addArtifacts(..., pyfile=True) of a zip of the package)")


def _worker_version(batches: Any) -> Any:
    """mapInArrow body run in a Python worker: unpickling it imports this package there."""
    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([pa.array([__version__])], ["version"])  # the worker's own package


def check_workers(spark: SparkSession) -> None:
    """Refuse (UsageError, one line with the fix) a session whose Python workers cannot import this package
    or run another version of it; once per session."""
    if id(spark) in _CHECKED:
        return
    try:
        rows = spark.range(1, numPartitions=1).mapInArrow(_worker_version, "version string").collect()
    except Exception as error:  # noqa: BLE001 - py4j / Connect errors carry the worker's traceback as text
        text = str(error)
        if "No module named 'privsyn_spark" in text:  # the package, or one of its modules
            raise UsageError(f"the Spark session's Python workers cannot import privsyn_spark: {_FIX}") from None
        errors = [line.strip() for line in text.splitlines() if "Error" in line or "Exception:" in line]
        first = errors[-1] if errors else type(error).__name__
        raise UsageError(f"the Spark session cannot run a Python task ({first[:300]}); check that its "
                         f"workers run a Python with pyspark, pyarrow and privsyn-spark") from None
    versions = {r[0] for r in rows}
    if versions != {__version__}:
        raise UsageError(f"the Spark session's Python workers run privsyn-spark {', '.join(sorted(versions))}, "
                         f"this driver {__version__}: install the same version on both")
    _CHECKED.add(id(spark))
    log.info("preflight: the session's Python workers import privsyn-spark %s", __version__)


def check_delta(spark: SparkSession, why: str) -> None:
    """Refuse (UsageError, one line) a session without Delta Lake when ``why`` (e.g. the ledger) needs it."""
    if not has_delta(spark):
        raise UsageError(f"{why} is a Delta table, but {delta_help()}")


def preflight(spark: SparkSession, needs_delta: str | None = None) -> None:
    """The checks before a fit (module docstring): Delta first when ``needs_delta`` says what needs it
    (no job), then the workers (one small job, once per session); the driver's PySpark version first."""
    check_pyspark()
    if needs_delta:
        check_delta(spark, needs_delta)
    check_workers(spark)
