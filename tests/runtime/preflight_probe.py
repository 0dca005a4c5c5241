"""Run by tests/runtime/test_preflight.py in a child process: a caller's own session (no Delta, and Python
workers that cannot import privsyn_spark: PYSPARK_PYTHON is a wrapper hiding the package), then what
``fit`` and every other entry point that needs Delta say, as one JSON line on stdout."""

import json
import sys

from pyspark.sql import SparkSession

import privsyn_spark
from privsyn_spark import PrivSyn, Schema
from privsyn_spark.errors import UsageError

runs = sys.argv[1]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())  # the caller's: no Delta
df = spark.read.csv(privsyn_spark.SAMPLE_DATA, header=True)
schema = Schema.load(privsyn_spark.SAMPLE_SCHEMA)
errors = {}
for name, ledger in (("with_ledger", f"{runs}/ledger"), ("no_ledger", None)):
    synth = PrivSyn(schema, epsilon=1.0, ledger=ledger, dataset_id="adult", run_id=name, runs_dir=runs,
                    no_ledger=ledger is None)
    try:
        synth.fit(df)
        errors[name] = None
    except UsageError as err:
        errors[name] = str(err)
for name, call in (("set_budget", lambda: privsyn_spark.set_budget(spark, f"{runs}/ledger", "adult", 1.0, 1e-9)),
                   ("budget_states", lambda: privsyn_spark.budget_states(spark, f"{runs}/ledger")),
                   ("write_delta", lambda: privsyn_spark.write_delta(df, f"{runs}/out"))):
    try:
        call()
        errors[name] = None
    except UsageError as err:
        errors[name] = str(err)
print(json.dumps(errors))
