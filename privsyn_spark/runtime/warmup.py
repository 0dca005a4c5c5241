"""Warming Spark up while the driver estimates, so the synthesis and the write do not pay for it.

A session's first Delta write and its first Python job pay a one-time cost -- class loading and JIT
in the JVM, starting Python workers and their imports -- of ~3 s on local[2] (~5 s on a busy machine),
which would land on the synthesis and the write of a small table. Estimation runs in Python on the
driver and leaves Spark idle, so a background thread spends that time on the warm-up jobs its caller
passes in (the pipeline: a 1-row Delta write into a folder of the run by the output's own
``createOrReplace`` path, :func:`privsyn_spark.write.delta_output.warm_write`, and a 1-row Arrow job
importing the synthesizer in a Python worker, kept for the synthesis,
:func:`privsyn_spark.synthesize.sharded.spark_driver.warm_worker`). Nothing of the input is read and
nothing but that folder is written; errors only skip the warm-up.
The thread is joined and its folder deleted before the block exits. Once per session (Spark
application): later runs in it find Spark warm.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.scratch import delete

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_WARMED: set[str] = set()
"""Spark application ids already warmed up in this process."""


WarmUpJob = Callable[["SparkSession", str], None]
"""A warm-up job: ``(spark, folder)``, writing into ``folder`` only."""


def _warm(spark: SparkSession, folder: str, jobs: Sequence[WarmUpJob]) -> None:
    try:
        for job in jobs:
            job(spark, folder)
    except Exception as error:  # noqa: BLE001 - an optimisation only: the run does not depend on it
        log.debug("Spark warm-up skipped: %s", error)


@contextmanager
def warm_up(spark: SparkSession | None, folder: str | None, jobs: Sequence[WarmUpJob] = ()) -> Iterator[None]:
    """Run the warm-up ``jobs`` on ``spark`` in a background thread while the block runs (see the module
    doc), writing only into ``folder`` (deleted on exit). No-op without a folder, without a JVM (Spark
    Connect) or when this session was warmed up before."""
    if spark is None or folder is None or not backend_of(spark).jvm:
        yield
        return
    app = spark.sparkContext.applicationId
    if app in _WARMED:
        yield
        return
    _WARMED.add(app)

    thread = threading.Thread(target=_warm, args=(spark, folder, tuple(jobs)), name="privsyn-warm-up", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        delete(spark, folder)
