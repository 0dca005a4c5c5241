"""spark-submit driver for the cluster engine test: Adult's 1-/2-way counts by both backends, to .npz."""

import sys

import numpy as np
from pyspark.sql import SparkSession

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.schema import load_schema

data, schema_path, out = sys.argv[1:4]
spark: SparkSession = build_spark_session(delta=False)
encoded = encode(spark.read.csv(data, header=True, inferSchema=True).repartition(6), load_schema(schema_path))
tables = {}
for backend in ("jvm", "arrow"):
    counts = count_marginals(encoded, one_and_two_way(encoded.domain), backend=backend)
    tables.update({f"{backend}:{','.join(m)}": t for m, t in counts.tables.items()})
np.savez(out, **tables)
print(f"executors: {spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1}")
spark.stop()
