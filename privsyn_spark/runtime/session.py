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


def delta_jars_dir() -> Path:
    """Folder where `scripts/setup.sh` resolves the Delta jars with Maven (PRIVSYN_SPARK_JARS_DIR overrides)."""
    return Path(os.environ.get("PRIVSYN_SPARK_JARS_DIR", Path.home() / ".cache" / "privsyn-spark" / "jars"))


def _delta_jar_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """Jar settings for Delta unless the caller already chose jars or packages."""
    if "spark.jars.packages" in conf or "spark.jars" in conf:
        return {}
    jars = sorted(delta_jars_dir().glob("*.jar"))
    if any(j.name.startswith("delta-spark_") for j in jars):
        return {"spark.jars": ",".join(str(j) for j in jars)}
    log.info("no Delta jars in %s; asking Spark to resolve %s from Maven", delta_jars_dir(), DELTA_PACKAGE)
    return {"spark.jars.packages": DELTA_PACKAGE}


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
        settings.update(_delta_jar_conf({**given, **conf}))
    settings.update(conf)

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    log.info("Spark %s session on %s", spark.version, spark.sparkContext.master)
    return spark
