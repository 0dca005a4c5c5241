"""The marginal engine's JVM backend: counting inside the executors' JVMs, no Python hand-off.

``MarginalCounter`` (Java, the Maven module ``jvm/`` at the repository root) reads each partition's
packed words as Spark internal rows and builds the same flat count array as
:mod:`privsyn_spark.measure.arrow_counter`; the partials are summed with a tree reduction and only
that array reaches the driver. ``scripts/setup.sh`` builds the jar
with Maven against the installed pyspark and puts it in this package (``jvm/privsyn-spark-counter.jar``,
shipped in the wheel); sessions started here add it to ``spark.jars``, spark-submit needs ``--jars``.
The plan starts with a header (magic, plan version, the driver's Spark major.minor) that the driver
and every executor check: another jar or Spark on the executors fails with a CounterDeploymentError.
Per-partition memory: the requested cells, 8 bytes each (at most 2^31 - 1 cells).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.errors import PrivsynError
from privsyn_spark.measure.encode import STATUS_BITS, TALLIED_STATUSES
from privsyn_spark.measure.packing import CounterLayout

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PLAN_MAGIC = 0x50535943                  # MarginalCounter.MAGIC
PLAN_VERSION = 3                         # MarginalCounter.PLAN_VERSION
ERROR_PREFIX = "privsyn-spark counter: "  # MarginalCounter.ERROR
TREE_DEPTH = 2
_MISSING_ON_EXECUTORS = (  # how a task of the counter fails where its classes cannot be loaded
    "ClassNotFoundException: io.privsyn.spark", "NoClassDefFoundError: io/privsyn/spark",
    "cannot assign instance of java.lang.invoke.SerializedLambda")  # Spark's closure around our function


class CounterDeploymentError(PrivsynError, RuntimeError):
    """The counter jar is missing on the executors, or they run another Spark or jar than the driver."""


def jvm_counter_loaded(spark: SparkSession) -> bool:
    """Whether the session's driver JVM can load the counter class (classic sessions only)."""
    from py4j.java_gateway import JavaClass

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect
        return False
    return isinstance(jvm.io.privsyn.spark.MarginalCounter, JavaClass)


def deployment_error(err: Exception) -> CounterDeploymentError | None:
    """The CounterDeploymentError a failed Spark call means (the jar missing on the executors, or another
    jar or Spark there), or None when it is another failure."""
    java = getattr(err, "java_exception", None)
    text = (str(java.toString()) if java is not None else "") + str(err)
    if ERROR_PREFIX in text:
        return CounterDeploymentError(text[text.index(ERROR_PREFIX):].splitlines()[0])
    if any(sign in text for sign in _MISSING_ON_EXECUTORS):
        return CounterDeploymentError(
            f"{ERROR_PREFIX}the driver has the counter jar but the executors do not: give it to "
            f"spark-submit with --jars (or spark.jars), not only on the driver's class path")
    return None


def _layout_bytes(layout: CounterLayout, spark_version: str) -> bytes:
    """The layout as the little-endian int32 plan ``MarginalCounter.Layout`` reads, after its header
    (magic, plan version, the driver's Spark major and minor version)."""
    needed = layout.needed
    index = {a: i for i, a in enumerate(needed)}
    major, minor = (int(x) for x in spark_version.split(".")[:2])
    plan = [PLAN_MAGIC, PLAN_VERSION, major, minor,
            layout.words, len(needed), len(layout.tables), len(layout.fields), layout.cells,
            STATUS_BITS, *TALLIED_STATUSES]
    lut_start = 0
    for a in needed:
        word, offset, bits = layout.fields[a]
        plan += [word, offset + STATUS_BITS, bits - STATUS_BITS, lut_start]
        lut_start += len(layout.luts[a])
    for k, table in enumerate(layout.tables):
        plan += [len(table), int(layout.offsets[k]), *[index[a] for a in table], *layout.shapes[k]]
    for word, offset, _ in layout.fields.values():
        plan += [word, offset]
    luts = [np.asarray(layout.luts[a], dtype="<i4") for a in needed]
    return np.asarray(plan, dtype="<i4").tobytes() + b"".join(lut.tobytes() for lut in luts)


def count_with_jvm(packed: Any, layout: CounterLayout) -> np.ndarray:
    """The flat count array of ``layout`` over ``packed`` (bigint words), counted in the JVM.

    Raises CounterDeploymentError when the executors lack the jar or run another Spark or jar.
    """
    from py4j.protocol import Py4JJavaError

    if layout.length >= 2**31 - 8:
        raise ValueError(f"the JVM counter holds at most 2^31 cells per request, not {layout.cells:,}")
    spark = packed.sparkSession
    counter = spark._jvm.io.privsyn.spark.MarginalCounter
    try:
        raw = counter.count(packed._jdf, _layout_bytes(layout, spark.version), TREE_DEPTH)
    except Py4JJavaError as err:
        deployment = deployment_error(err)
        if deployment is not None:
            raise deployment from None
        raise
    return np.frombuffer(bytes(raw), dtype="<i8").astype(np.int64)
