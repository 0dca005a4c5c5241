"""privsyn-spark as an Airflow DAG: a warehouse job over a daily-partitioned table.

``mode=fit`` (default): budget_check -> measure -> synthesize -> evaluate, each a spark-submit of
jobs/; ``mode=resample``: sample only (no input read, nothing charged) from the dataset's latest
fitted run. Every task gets its arguments from the DAG params (trigger with a config to override them).

Partitions (docs/scheduling.md): with ``partition_column`` set (e.g. ``day``), a DAG run is scoped
to the partition ``partition_column = partition_value``, where ``partition_value`` is a template
rendered for each DAG run (default ``{{ ds }}``, the logical date). Only that partition's files are
read, and the synthetic rows replace that partition of the output (replaceWhere). The run id is
``<dataset_id>.<column>_<value>``: a retried task, a cleared DAG run or a backfill of a day already
run is the same run, so the ledger charges it once and every attempt reuses the measurements its
first attempt drew; synthesis with the same seed rewrites the same partition. Without a partition
column the run id is the Airflow run id (as before: each DAG run measures the whole input).
``catchup`` (``PRIVSYN_DAG_CATCHUP=1``) or ``airflow backfill create --dag-id privsyn_spark --from-date
.. --to-date ..`` runs one DAG run per missed day, one at a time (``max_active_runs=1``): one
partition, one reservation, one replaceWhere commit each.

A scoped DAG run waits for its partition: the sensor ``wait_for_partition`` (between budget_check and
measure) pokes every 5 minutes, for a day at most, until the input holds a data file in the partition
(a Delta table's log read with delta-rs, ``deltalake``, when the worker has it; a Hive-style
``column=value`` folder otherwise; a location the worker cannot read passes, and the measure task
then refuses a partition with no files itself: exit 4, before anything is charged).

The first task, budget_check, reads only the ledger and prints the forecast (how many more runs at
this epsilon fit, of the dataset or of the partition); on the day the budget runs out it fails there
(exit 3, not retried) before the measure task's Spark job reads anything. The synthesize and sample
tasks have the output table as an Airflow Asset outlet, so downstream DAGs can be scheduled on it.

Required by default (a task fails with exit code 2, not retried, while they are missing):

- a budget ledger and the dataset's id: ``PRIVSYN_DAG_LEDGER`` (a Delta path on shared storage or a
  catalog table) and ``PRIVSYN_DAG_DATASET_ID``, or the ``ledger`` / ``dataset_id`` params; store the
  dataset's total budget once, before the first run:
  ``privsyn-spark budget set --ledger L --dataset-id ID --epsilon E --delta D``;
- a runs dir every task's driver can read: ``PRIVSYN_DAG_RUNS_DIR`` or the ``runs_dir`` param, e.g.
  ``hdfs:///privsyn/runs``, ``s3a://bucket/privsyn/runs``, ``abfss://c@account.dfs.core.windows.net/runs``
  or a shared mount (a local temp folder per worker is not: synthesize could not find the measurements).

A refused budget (exit 3), bad input data (4) or a usage error (2) fails the task at once
(``AirflowFailException``): retrying cannot help. Any other failure (1) is retried.

Deployment settings come from the environment of the Airflow worker (the file imports nothing of
privsyn-spark, which needs to be installed only where spark-submit runs the jobs):

- ``PRIVSYN_SPARK_CONN_ID``  Spark connection id (default ``spark_default``), e.g. ``spark_local``
  with ``AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[2]"}'``
- ``PRIVSYN_JOBS_DIR``       folder of the jobs/ scripts (default: ``jobs/`` of this repository)
- ``PRIVSYN_SPARK_JARS_DIR`` Delta jars resolved by scripts/setup.sh (default
  ``~/.cache/privsyn-spark/jars``); when it has none, Spark resolves ``PRIVSYN_SPARK_PACKAGES``
  (default the Delta package) from Maven
- ``PRIVSYN_COUNTER_JAR``    the marginal engine's counter jar (default: the one scripts/setup.sh built
  into this repository's package, ``privsyn_spark/measure/jvm/privsyn-spark-counter.jar``)
- ``PRIVSYN_PY_FILES``       zip/wheel of privsyn_spark shipped to executors (when they lack it)
- ``PRIVSYN_SPARK_LOG4J``    the driver's log4j2 configuration (default ``deploy/spark/log4j2.properties``:
  Spark's own loggers at WARN, so a task log holds the tool's lines; ``none``: Spark's default)
- ``PRIVSYN_PYSPARK_PYTHON`` Python of the driver and executors (spark-submit's PYSPARK_PYTHON)
- ``PRIVSYN_DAG_WORKDIR``    where the default output lives (default a temp folder)
- ``PRIVSYN_DAG_INPUT``, ``PRIVSYN_DAG_SCHEMA``, ``PRIVSYN_DAG_OUTPUT``, ``PRIVSYN_DAG_RUNS_DIR``,
  ``PRIVSYN_DAG_LEDGER``, ``PRIVSYN_DAG_DATASET_ID``  defaults of the matching params (the bundled
  Adult sample by default; no default runs dir, ledger or dataset id)
"""

from __future__ import annotations

import os
import re
import tempfile
import zlib
from datetime import datetime, timedelta
from pathlib import Path

import jinja2

try:  # Airflow 3.x
    from airflow.providers.standard.operators.python import BranchPythonOperator
    from airflow.providers.standard.sensors.python import PythonSensor
    from airflow.sdk import DAG, Asset, Param
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2.x
    from airflow.datasets import Dataset as Asset
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import DAG, Param
    from airflow.operators.python import BranchPythonOperator
    from airflow.sensors.python import PythonSensor
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

DAG_ID = "privsyn_spark"
REPO = Path(__file__).resolve().parents[3]
JOBS_DIR = Path(os.environ.get("PRIVSYN_JOBS_DIR", REPO / "jobs"))
CONN_ID = os.environ.get("PRIVSYN_SPARK_CONN_ID", "spark_default")
DELTA_PACKAGE = os.environ.get("PRIVSYN_SPARK_PACKAGES", "io.delta:delta-spark_4.2_2.13:4.4.0")
JARS_DIR = Path(os.environ.get("PRIVSYN_SPARK_JARS_DIR", Path.home() / ".cache" / "privsyn-spark" / "jars"))
COUNTER_JAR = Path(os.environ.get("PRIVSYN_COUNTER_JAR",
                                  REPO / "privsyn_spark" / "measure" / "jvm" / "privsyn-spark-counter.jar"))
WORKDIR = Path(os.environ.get("PRIVSYN_DAG_WORKDIR", Path(tempfile.gettempdir()) / "privsyn-spark"))
LOG4J = os.environ.get("PRIVSYN_SPARK_LOG4J", str(REPO / "deploy" / "spark" / "log4j2.properties"))
SUBMIT_CONF = {} if LOG4J == "none" else {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}"}
"""spark-submit settings of every task: the driver's log configuration (Spark's own loggers at WARN)."""


def _delta_jars() -> tuple[str | None, str | None]:
    """(jars, packages) for spark-submit: the Delta jars setup.sh resolved (else the Delta package) and
    the marginal engine's counter jar when it is built."""
    delta = [j for j in sorted(JARS_DIR.glob("*.jar")) if not j.name.startswith("privsyn-spark-counter-")] \
        if JARS_DIR.is_dir() else []
    has_delta = any(j.name.startswith("delta-spark_") for j in delta)
    jars = (delta if has_delta else []) + ([COUNTER_JAR] if COUNTER_JAR.is_file() else [])
    return ",".join(str(j) for j in jars) or None, None if has_delta else DELTA_PACKAGE


NON_RETRYABLE_EXIT_CODES = (2, 3, 4)
"""privsyn-spark's exit codes for a usage error, a refused budget and bad input data
(privsyn_spark.errors.NON_RETRYABLE_EXIT_CODES; this file imports nothing of privsyn-spark)."""


def spark_submit_exit_code(hook, error: BaseException) -> int | None:
    """The job's exit code after a failed spark-submit: the driver's (Kubernetes) if known, else the
    spark-submit process's, else the one in the hook's error message."""
    driver = getattr(hook, "_spark_exit_code", None)
    if driver not in (None, 0):
        return int(driver)
    process = getattr(getattr(hook, "_submit_sp", None), "returncode", None)
    if process not in (None, 0):
        return int(process)
    found = re.search(r"(?:Error|exit) code is: (\d+)", str(error))
    return int(found.group(1)) if found else None


class PrivsynSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that fails at once (no retry) when the job exits 2, 3 or 4."""

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException as err:
            code = spark_submit_exit_code(self._hook, err)
            if code in NON_RETRYABLE_EXIT_CODES:
                raise AirflowFailException(f"privsyn-spark exited {code} (2 usage, 3 budget refused, 4 bad input "
                                           f"data): not retried; see the task log") from err
            raise


def safe_id(value: object) -> str:
    """A run id usable as a folder name (Airflow's contain ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(value)).strip("_") or "run"


@jinja2.pass_context
def expand(context, value: object) -> str:
    """A param holding a template (``{{ ds }}``) rendered with the task's context (params are not)."""
    return context.environment.from_string(str(value)).render(context.get_all())


def stable_seed(value: object) -> int:
    """A seed from a string (CRC-32): the resample of one partition gets the same rows on a rerun."""
    return zlib.crc32(str(value).encode())


PARTITION_VALUE = "(params.partition_value | expand)"
PARTITION = f"(params.partition_column ~ '=' ~ {PARTITION_VALUE} if params.partition_column else '')"
RUN_ID = ("{{ (params.run_id or (params.dataset_id ~ '.' ~ " + PARTITION
          + " if params.partition_column else run_id)) | safe_id }}")
LEDGER_ARGS = [  # empty values mean "not set": the CLI then refuses the run (exit 2), there is no default
    "--dataset-id={{ params.dataset_id }}",
    "--ledger={{ params.ledger }}",
]
SCOPE_ARGS = ["--partition={{ " + PARTITION + " }}"]  # empty: an unscoped run
PEOPLE_ARGS = [  # a people schema (docs/people.md): the persons' table and how many (empty: the noisy count)
    "--persons-output={{ params.persons_output }}",
    "--people={{ params.people or '' }}",
]
STEP_ARGS = [
    "--input", "{{ params.input }}",
    "--schema", "{{ params.schema }}",
    "--output", "{{ params.output }}",
    "--epsilon", "{{ params.epsilon }}",
    "--delta", "{{ params.delta }}",
    "--run-id", RUN_ID,
    "--runs-dir", "{{ params.runs_dir }}",
    "--mode", "overwrite",  # a retry, a cleared task or a backfill rewrites its own table (partition)
    "--seed", "{{ params.seed }}",
    "--synthesizer", "{{ params.synthesizer }}",
    *LEDGER_ARGS,
    *SCOPE_ARGS,
    "--where={{ params.where }}",
    # empty: the schema's privacy_unit (else one row)
    "--privacy-id={{ params.privacy_id }}",
    "--max-rows-per-id={{ params.max_rows_per_id or '' }}",
    *PEOPLE_ARGS,
    "--people-split={{ params.people_split }}",
    "--parents={{ params.parents }}",  # empty: no parent table (a people schema's parent-child form needs one)
]
BUDGET_CHECK_ARGS = [
    "check", "--epsilon", "{{ params.epsilon }}", "--delta", "{{ params.delta }}", "--run-id", RUN_ID,
    "--dataset-id={{ params.dataset_id }}", "--ledger={{ params.ledger }}", *SCOPE_ARGS,
]
SAMPLE_ARGS = [  # resample: the dataset's latest fitted run, a seed of its own per partition value
    "--from-run", "latest", "--schema", "{{ params.schema }}", "--output", "{{ params.output }}", "--mode", "overwrite",
    "--runs-dir", "{{ params.runs_dir }}", "--synthesizer", "{{ params.synthesizer }}",
    "--seed", "{{ (params.seed ~ '/' ~ " + PARTITION_VALUE + ") | stable_seed }}",
    *LEDGER_ARGS, *SCOPE_ARGS, *PEOPLE_ARGS,
]


def partition_landed(table: str, column: str, value: str) -> bool:
    """Whether the input ``table`` holds a data file in its partition ``column=value`` (the sensor before
    the measure task; module docstring). True for an unscoped run and where the worker cannot tell."""
    if not column:
        return True
    local = Path(table[len("file://"):] if table.startswith("file://") else table)
    if "://" not in table and not local.is_dir():
        return True  # a catalog table or a missing path: the measure task says what is wrong
    if "://" in table or (local / "_delta_log").is_dir():
        try:
            import deltalake

            return bool(deltalake.DeltaTable(table).file_uris(file_pruning_predicate=[(column, "=", value)]))
        except Exception:  # noqa: BLE001 - no delta-rs here, not a Delta table, or a store it cannot read
            return True
    folder = local / f"{column}={value}"
    return folder.is_dir() and any(f.is_file() and not f.name.startswith(("_", ".")) for f in folder.rglob("*"))


def choose_mode(params: dict) -> str:
    """The branch of the DAG run: fit (budget_check first) or resample (sample only)."""
    return "sample" if params.get("mode") == "resample" else "budget_check"


def output_asset(output: str) -> Asset:
    """The Airflow Asset of the output table (a path: ``file://``; a URI or a catalog name as it is)."""
    uri = output if "://" in output else (Path(output).absolute().as_uri() if "/" in output else f"table://{output}")
    return Asset(name="privsyn_synthetic", uri=uri)

PARAMS = {
    "input": Param(os.environ.get("PRIVSYN_DAG_INPUT", str(REPO / "privsyn_spark" / "sample" / "adult.csv.gz")),
                   type="string", minLength=1, description="input table: Delta/Parquet/CSV path or catalog name"),
    "schema": Param(os.environ.get("PRIVSYN_DAG_SCHEMA",
                                   str(REPO / "privsyn_spark" / "sample" / "adult.schema.yaml")),
                    type="string", minLength=1, description="schema file (YAML/JSON) of the public domain"),
    "output": Param(os.environ.get("PRIVSYN_DAG_OUTPUT", str(WORKDIR / "synthetic")), type="string", minLength=1,
                    description="synthetic Delta table: a path or a catalog table name"),
    "epsilon": Param(1.0, type="number", exclusiveMinimum=0, description="privacy budget epsilon of the run"),
    "delta": Param(1e-9, type="number", exclusiveMinimum=0, exclusiveMaximum=1,
                   description="privacy budget delta (never derived from the data)"),
    "dataset_id": Param(os.environ.get("PRIVSYN_DAG_DATASET_ID", ""), type="string",
                        description="dataset key in the budget ledger (required; its budget: `budget set`)"),
    "ledger": Param(os.environ.get("PRIVSYN_DAG_LEDGER", ""), type="string",
                    description="budget ledger Delta table holding the dataset's budget (required)"),
    "runs_dir": Param(os.environ.get("PRIVSYN_DAG_RUNS_DIR", ""), type="string",
                      description="run artifacts on storage every task reads: hdfs://, s3a://, abfss://, a shared "
                                  "mount (required)"),
    "run_id": Param("", type="string",
                    description="run id (empty: the Airflow run id, so retries reuse the measurements)"),
    "seed": Param(0, type="integer", minimum=0, description="seed of synthesis (not of the privacy noise)"),
    "synthesizer": Param("gum", enum=["gum", "pgm"], description="gum (default) or pgm sampling"),
    "privacy_id": Param("", type="string",
                        description="id column(s) of a person, the privacy unit (empty: the schema's, else one row)"),
    "max_rows_per_id": Param(0, type="integer", minimum=0,
                             description="rows kept per person, the bound K (0: the schema's, else 1)"),
    "persons_output": Param("", type="string",
                            description="a people schema: the synthetic persons' Delta table (their rows go to "
                                        "output); empty for any other schema"),
    "people": Param(0, type="integer", minimum=0,
                    description="a people schema: synthetic persons (0: the noisy person count)"),
    "people_split": Param("", type="string",
                          description="a people schema: PERSONS,DEGREES,ROWS shares of rho (empty: 0.35,0.05,0.60)"),
    "parents": Param("", type="string",
                     description="a people schema's parent-child form: the parent table, read like input (then the "
                                 "child table); empty: none"),
    "mode": Param("fit", enum=["fit", "resample"],
                  description="fit: measure + synthesize + evaluate (charged); resample: sample only from the "
                              "dataset's latest fitted run (no input read, nothing charged)"),
    "partition_column": Param(os.environ.get("PRIVSYN_DAG_PARTITION_COLUMN", ""), type="string",
                              description="partition column of the input scoping each DAG run (empty: the "
                                          "whole input); the output gets the same partition"),
    "partition_value": Param("{{ ds }}", type="string",
                             description="template of the partition value, rendered per DAG run (default the "
                                         "logical date, {{ ds }})"),
    "where": Param("", type="string", description="extra Spark SQL predicate on the input rows (empty: none)"),
}

_jars, _packages = _delta_jars()
_env = {"PYSPARK_PYTHON": os.environ["PRIVSYN_PYSPARK_PYTHON"]} if os.environ.get("PRIVSYN_PYSPARK_PYTHON") else None

with DAG(
    dag_id=DAG_ID,
    description="Differentially private synthetic data: measure -> synthesize -> evaluate on Spark, per partition",
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    catchup=os.environ.get("PRIVSYN_DAG_CATCHUP", "") in ("1", "true", "True"),
    max_active_runs=1,
    params=PARAMS,
    user_defined_filters={"safe_id": safe_id, "expand": expand, "stable_seed": stable_seed},
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2), "retry_exponential_backoff": True},
    tags=["privsyn-spark", "privacy"],
    doc_md=__doc__,
) as dag:
    asset = output_asset(PARAMS["output"].value)

    def submit(task_id: str, job: str, args: list[str], outlets: list | None = None) -> PrivsynSparkSubmitOperator:
        return PrivsynSparkSubmitOperator(
            task_id=task_id, application=str(JOBS_DIR / f"{job}.py"), application_args=list(args), conn_id=CONN_ID,
            name=f"privsyn-{task_id}", jars=_jars, packages=_packages, conf=dict(SUBMIT_CONF),
            py_files=os.environ.get("PRIVSYN_PY_FILES") or None, env_vars=_env, outlets=outlets or [])

    mode = BranchPythonOperator(task_id="mode", python_callable=choose_mode, retries=0)
    check = submit("budget_check", "budget", BUDGET_CHECK_ARGS)
    landed = PythonSensor(task_id="wait_for_partition", python_callable=partition_landed, mode="reschedule",
                          poke_interval=timedelta(minutes=5).total_seconds(), timeout=timedelta(days=1).total_seconds(),
                          op_kwargs={"table": "{{ params.input }}", "column": "{{ params.partition_column }}",
                                     "value": "{{ " + PARTITION_VALUE + " }}"})
    steps = [submit(step, step, STEP_ARGS, [asset] if step == "synthesize" else None)
             for step in ("measure", "synthesize", "evaluate")]
    mode >> [check, submit("sample", "sample", SAMPLE_ARGS, [asset])]
    check >> landed >> steps[0] >> steps[1] >> steps[2]
