"""The marginal engine's counter jar shipped in the package (``privsyn_spark/measure/jvm/``): where it is and
which Spark it was built for; sessions started here put it on ``spark.jars`` (:mod:`.session`), the
engine's JVM counter (:mod:`privsyn_spark.measure.jvm_counter`) runs it."""

from __future__ import annotations

import importlib.resources
import logging
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

JAR_NAME = "privsyn-spark-counter.jar"  # package data of privsyn_spark.measure, in jvm/
JAR_PREFIX = "privsyn-spark-counter-"    # older builds compiled into a jars cache; never put on a classpath


def packaged_jar(jar: Path | None = None) -> Path | None:
    """The counter jar shipped in the package (or ``jar``), or None (with a warning) when it is missing or
    was built for another Spark minor version than this pyspark (the engine then counts in Python)."""
    import pyspark

    jar = Path(jar or str(importlib.resources.files("privsyn_spark.measure").joinpath("jvm").joinpath(JAR_NAME)))
    if not jar.is_file():
        log.warning("the counter jar %s is missing (build it with scripts/setup.sh, which needs a JDK and "
                    "Maven): the marginal engine will count in Python workers, about 2x slower", jar)
        return None
    built_for = jar_spark_version(jar)
    if _minor(built_for) != _minor(pyspark.__version__):
        log.warning("the counter jar %s was built for Spark %s, this is pyspark %s: the marginal engine will "
                    "count in Python workers (about 2x slower); rebuild it with scripts/setup.sh",
                    jar, built_for, pyspark.__version__)
        return None
    return jar


def jar_spark_version(jar: Path) -> str:
    """The Spark version a counter jar was compiled against (its counter.properties)."""
    with zipfile.ZipFile(jar) as z:
        text = z.read("io/privsyn/spark/counter.properties").decode()
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return values.get("spark.version", "unknown").strip()


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])
