"""spark-submit driver for the cluster test of a counter jar on the driver only: prints the error."""

import sys

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import count_marginals
from privsyn_spark.measure.jvm_counter import CounterDeploymentError
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.schema import load_schema

data, schema_path = sys.argv[1:3]
spark = build_spark_session(delta=False)
encoded = encode(spark.read.csv(data, header=True, inferSchema=True), load_schema(schema_path))
try:
    count_marginals(encoded, [("age", "workclass")], backend="jvm")
    print("error: none")
except CounterDeploymentError as err:
    print(f"error: {err}")
spark.stop()
