"""Where a run's artifacts go when the caller did not say: ``./runs``, on a local session only.

On a cluster (a master that is not ``local``) the driver's disk is not shared storage: a retry on
another driver, the next step of an Airflow DAG or a later ``sample`` would not find the run's
measurements there (and with a ledger would be refused, the artifact "lost"). So ``runs_dir`` is
required there, with a one-line error saying how to give it; an explicit local path is taken as
given (a mounted volume, ``/dbfs/...``, ``/Volumes/...``, an NFS share are local paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.backend import backend_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

DEFAULT_RUNS_DIR = "runs"
"""The runs dir of a local session when none is given (relative to the working directory)."""


def master_of(spark: SparkSession) -> str:
    """The session's master URL (``local[2]``, ``spark://...``, ``yarn``, ``k8s://...``); on Spark Connect
    the server's ``spark.master`` ('' when it does not say)."""
    return backend_of(spark).master()


def check_default_runs_dir(spark: SparkSession | None, master: str | None = None) -> None:
    """Refuse (one-line :class:`UsageError`) the default ``./runs`` on a session whose master is not local
    (``spark`` None: on the ``master`` a session is about to be built with, when it is known)."""
    master = master_of(spark) if spark is not None else master
    if master is None or master.startswith("local"):
        return
    connect = spark is not None and not backend_of(spark).jvm
    where = ("a path this process and the server both write, e.g. /Volumes/catalog/schema/volume/runs" if connect
             else "a location every driver reads, e.g. s3a://bucket/privsyn/runs, hdfs:///privsyn/runs or "
                  "/Volumes/catalog/schema/volume/runs")
    raise UsageError(f"runs_dir is required on a cluster (master {master or 'not local'}): the driver's "
                     f"./{DEFAULT_RUNS_DIR} is not shared storage; pass --runs-dir (runs_dir=...) {where}")
