"""Run by tests/runtime/test_session.py under spark-submit: the pipeline's session builder, then
what the session's settings are and whether Delta works, as one JSON line on stdout."""

import json
import sys

from pyspark.sql import SparkSession

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.session import build_spark_session

KEYS = ("spark.app.name", "spark.sql.session.timeZone", "spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions",
        "spark.databricks.delta.snapshotPartitions", "spark.sql.extensions", "spark.sql.catalog.spark_catalog")

if sys.argv[1] == "caller-session-without-delta":  # a job that built its own session first
    SparkSession.builder.getOrCreate()
    try:
        build_spark_session()
        print(json.dumps({"error": None}))
    except UsageError as err:
        print(json.dumps({"error": str(err)}))
    sys.exit(0)

spark = build_spark_session()
from privsyn_spark.runtime.input_table import read_table  # noqa: E402
from privsyn_spark.write.delta_output import write_delta  # noqa: E402

version = write_delta(spark.range(4), sys.argv[2])
print(json.dumps({"conf": {k: spark.conf.get(k, None) for k in KEYS}, "version": version,
                  "rows": read_table(spark, sys.argv[2]).count()}))
