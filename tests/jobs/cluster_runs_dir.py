"""spark-submit driver of the runs-dir test on a standalone master (no workers: nothing may run a job):
prints each refusal of the default ./runs, then what an explicit runs dir gives."""

import contextlib
import io
import sys

from privsyn_spark import PrivSyn, Schema
from privsyn_spark.cli import entry as cli
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.session import build_spark_session

schema_path, shared = sys.argv[1:3]
spark = build_spark_session()  # with Delta, as the CLI step needs
print(f"master: {spark.sparkContext.master}")
schema = Schema.load(schema_path)
try:
    PrivSyn(schema, epsilon=1.0, no_ledger=True, run_id="r1").fit(spark.range(3).toDF("age"))
    print("api error: none")
except UsageError as err:
    print(f"api error: {err}")
folder = PrivSyn(schema, epsilon=1.0, no_ledger=True, runs_dir=shared).run_folder("r1", spark)
print(f"explicit: {folder.base}")
said = io.StringIO()
with contextlib.redirect_stderr(said):
    code = cli.main(["measure", "--input", schema_path, "--schema", schema_path, "--run-id", "r1", "--no-ledger"])
print(f"cli exit: {code}")
print("cli said: " + " | ".join(line for line in said.getvalue().splitlines() if "error" in line))
spark.stop()
