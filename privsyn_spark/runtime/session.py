"""The one place that builds the SparkSession: local mode with Delta by default, everything overridable."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
"""The Delta jar matching pyspark 4.2.0 / delta-spark 4.4.0 (4.4.1's jar is not on Maven Central)."""


def jars_dir() -> Path:
    """Folder of the jars `scripts/setup.sh` prepares (PRIVSYN_SPARK_JARS_DIR overrides): the Delta jars
    resolved with Maven and the marginal engine's counter jar."""
    return Path(os.environ.get("PRIVSYN_SPARK_JARS_DIR", Path.home() / ".cache" / "privsyn-spark" / "jars"))


def _jar_conf(conf: Mapping[str, str], delta: bool, submitted: bool = False) -> dict[str, str]:
    """``spark.jars`` (and ``spark.jars.packages`` for Delta when it is not resolved locally).

    Jars or packages the caller chose are kept; the counter jar is added to them when it can be built,
    except under spark-submit, whose driver JVM already runs: there it must come with ``--jars``.
    """
    from privsyn_spark.measure.jvm_counter import JAR_PREFIX, counter_jar

    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    settings: dict[str, str] = {}
    if delta and "spark.jars.packages" not in conf and "spark.jars" not in conf:
        local = sorted(j for j in jars_dir().glob("*.jar") if not j.name.startswith(JAR_PREFIX))
        if any(j.name.startswith("delta-spark_") for j in local):
            jars += [str(j) for j in local]
        else:
            log.info("no Delta jars in %s; asking Spark to resolve %s from Maven", jars_dir(), DELTA_PACKAGE)
            settings["spark.jars.packages"] = DELTA_PACKAGE
    counter = None if submitted else counter_jar(jars_dir())
    if counter is not None and not any(Path(j).name == counter.name for j in jars):
        jars.append(str(counter))
    if jars:
        settings["spark.jars"] = ",".join(jars)
    return settings


def build_spark_session(
    master: str | None = None,
    app_name: str = "privsyn-spark",
    conf: Mapping[str, str] | None = None,
    delta: bool = True,
    log_level: str = "ERROR",
):
    """Get or create the SparkSession.

    ``master`` defaults to $PRIVSYN_SPARK_MASTER, then to whatever spark-submit set, then to
    ``local[*]``. ``conf`` entries override every default here (e.g. ``spark.jars.packages`` for a
    cluster that resolves Delta itself). Sessions run in UTC with quiet logs.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter's packages
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    master = master or os.environ.get("PRIVSYN_SPARK_MASTER")
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: read its --master/--conf from its JVM
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
    given = dict(SparkConf().getAll())  # what spark-submit / spark-defaults already set
    submitted = "spark.master" in given
    if master is None and not submitted:
        master = "local[*]"
    local = (master or os.environ.get("MASTER", "") or "").startswith("local")

    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
    }
    if local:
        settings.update({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8",
                         "spark.driver.memory": os.environ.get("PRIVSYN_DRIVER_MEMORY", "4g")})
    if delta:
        settings.update({
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.databricks.delta.snapshotPartitions": "2" if local else "50",
        })
    settings.update(conf)
    settings.update(_jar_conf({**given, **conf}, delta, submitted="PYSPARK_GATEWAY_PORT" in os.environ))

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    log.info("Spark %s session on %s", spark.version, spark.sparkContext.master)
    return spark
