"""The Airflow DAG: it imports cleanly (DagBag), and it runs end to end against local Spark."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.jobs.conftest import DAGS_DIR, JOBS_DIR, REPO, SAMPLE_INPUT, SAMPLE_SCHEMA, VENV_BIN, airflow_env

pytest.importorskip("airflow", reason="the airflow extra is not installed")

VENV_AIRFLOW = VENV_BIN / "airflow"
AIRFLOW_RUN_ID = "scheduled__2024-01-02T00:00:00+00:00"
SUBMITTED = ("budget_check", "measure", "synthesize", "evaluate", "sample")  # the spark-submit tasks

# Runs in a child process (Airflow reads AIRFLOW_HOME once, at import): loads the dags folder in a
# DagBag and prints what the test checks, with each task's arguments rendered from the param defaults.
_INSPECT = textwrap.dedent(f"""
    import json, sys, jinja2
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder={str(DAGS_DIR)!r})
    dag = bag.dags.get("privsyn_spark")
    out = {{"import_errors": {{str(k): str(v) for k, v in bag.import_errors.items()}}, "dag_ids": sorted(bag.dags)}}
    if dag is not None:
        env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        env.filters.update(dag.user_defined_filters or {{}})
        params = {{k: dag.params[k] for k in dag.params}}
        submitted = [t for t in dag.tasks if hasattr(t, "application")]
        out.update(
            task_ids=dag.task_ids, params=params, schedule=str(dag.schedule),
            task_types=sorted({{type(t).__name__ for t in submitted}}),
            non_retryable=list(sys.modules[type(submitted[0]).__module__].NON_RETRYABLE_EXIT_CODES),
            upstream={{t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}},
            retries={{t.task_id: t.retries for t in dag.tasks}},
            applications={{t.task_id: t.application for t in submitted}},
            conn_ids={{t.task_id: t._conn_id for t in submitted}},
            jars={{t.task_id: [t.jars, t.packages] for t in submitted}},
            outlets={{t.task_id: [a.uri for a in t.outlets] for t in dag.tasks}},
            args={{t.task_id: [env.from_string(a).render(params=params, run_id={AIRFLOW_RUN_ID!r}, ds="2024-01-02")
                               for a in t.application_args] for t in submitted}},
        )
    print("RESULT" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def dag_info(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    done = subprocess.run([sys.executable, "-c", _INSPECT], env=airflow_env(home), capture_output=True, text=True,
                          timeout=300, cwd=home)
    assert done.returncode == 0, done.stderr[-4000:]
    line = [out for out in done.stdout.splitlines() if out.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_dag_imports_without_errors(dag_info):
    assert dag_info["import_errors"] == {}
    assert dag_info["dag_ids"] == ["privsyn_spark"]


def test_dag_has_the_steps_params_and_retries(dag_info):
    assert dag_info["task_ids"] == ["mode", "budget_check", "wait_for_partition", *SUBMITTED[1:]]
    assert dag_info["upstream"] == {"mode": [], "budget_check": ["mode"], "wait_for_partition": ["budget_check"],
                                    "measure": ["wait_for_partition"], "synthesize": ["measure"],
                                    "evaluate": ["synthesize"], "sample": ["mode"]}
    assert all(dag_info["retries"][t] > 0 for t in SUBMITTED)
    output_uri = f"file://{dag_info['params']['output']}"
    assert dag_info["outlets"]["synthesize"] == [output_uri] and dag_info["outlets"]["sample"] == [output_uri]
    assert dag_info["schedule"] == "@daily"
    assert {"input", "schema", "output", "epsilon", "delta", "dataset_id", "runs_dir", "run_id"} <= set(
        dag_info["params"])
    assert dag_info["params"]["input"] == str(SAMPLE_INPUT)
    assert dag_info["params"]["schema"] == str(SAMPLE_SCHEMA)
    for step, app in dag_info["applications"].items():
        job = {"budget_check": "budget"}.get(step, step)
        assert app == str(JOBS_DIR / f"{job}.py")
        assert (JOBS_DIR / f"{job}.py").exists()
    assert set(dag_info["conn_ids"].values()) == {"spark_local"}  # from PRIVSYN_SPARK_CONN_ID
    for jars, packages in dag_info["jars"].values():  # the local jars (Delta and the counter)
        assert jars and jars.endswith("/privsyn-spark-counter.jar") and "delta-spark_" in jars and not packages
        assert "privsyn-spark-counter-" not in jars  # older builds left in the jars cache are not shipped


def test_dag_arguments_are_what_the_cli_expects_and_require_a_ledger_and_runs_dir(dag_info):
    from privsyn_spark.cli.entry import build_parser, config_from_args, validate_run_args
    from privsyn_spark.errors import NON_RETRYABLE_EXIT_CODES, UsageError

    assert dag_info["task_types"] == ["PrivsynSparkSubmitOperator"]
    assert tuple(dag_info["non_retryable"]) == NON_RETRYABLE_EXIT_CODES
    filled = {"--ledger=": "--ledger=/shared/ledger", "--dataset-id=": "--dataset-id=adult"}
    for step in ("measure", "synthesize", "evaluate"):
        args = dag_info["args"][step]
        assert "--ledger=" in args and "--dataset-id=" in args and args[args.index("--runs-dir") + 1] == ""
        with pytest.raises(UsageError, match="ledger"):  # no default ledger: the task exits 2, not retried
            validate_run_args(build_parser().parse_args([step, *args]))
        args = [filled.get(a, a) for a in args]
        with pytest.raises(UsageError, match="runs-dir"):  # no default runs dir either
            validate_run_args(build_parser().parse_args([step, *args]))
        args[args.index("--runs-dir") + 1] = "hdfs:///privsyn/runs"
        parsed = build_parser().parse_args([step, *args])
        validate_run_args(parsed)
        config = config_from_args(parsed)
        assert config.run_id == "scheduled__2024-01-02T00_00_00_00_00"  # the Airflow run id, folder-safe
        assert config.input == str(SAMPLE_INPUT) and config.synth.epsilon == 1.0 and config.synth.delta == 1e-9
        assert (config.synth.ledger, config.synth.dataset_id, config.synth.runs_dir) == ("/shared/ledger", "adult",
                                                                       "hdfs:///privsyn/runs")
        assert (config.synth.privacy_id, config.synth.max_rows_per_id) == (None, None)  # empty params: the schema's
        assert "--privacy-id=" in args and "--max-rows-per-id=" in args
        assert (config.persons_output, config.people) == ("", None)  # empty params: not set (a flat schema)
        assert "--persons-output=" in args and "--people=" in args
        assert config.parents == "" and "--parents=" in args  # empty param: no parent table
    sample = build_parser().parse_args(["sample", *dag_info["args"]["sample"]])
    assert (sample.persons_output, sample.people) == ("", None)  # the resample mode of a flat schema


# Runs the DAG's operator class on scripts exiting with a given code (spark-submit on local[1]).
_EXECUTE = textwrap.dedent(f"""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import AirflowFailException
    bag = DagBag(dag_folder={str(DAGS_DIR)!r})
    operator = type(bag.dags["privsyn_spark"].get_task("measure"))
    out = {{}}
    for name, app, args in json.loads(sys.argv[1]):
        task = operator(task_id=name, application=app, application_args=args, conn_id="spark_local")
        try:
            task.execute({{}})
            out[name] = "ok"
        except AirflowFailException:
            out[name] = "failed, no retry"
        except Exception as err:
            out[name] = "retryable " + type(err).__name__
    print("RESULT" + json.dumps(out))
""")


def test_budget_refusals_and_bad_input_are_not_retried(tmp_path):
    home = tmp_path / "airflow"
    home.mkdir()
    scripts = {}
    for code in (1, 3, 4):
        scripts[code] = tmp_path / f"exit{code}.py"
        scripts[code].write_text(f"import sys\nsys.exit({code})\n")
    cases = [["usage", str(JOBS_DIR / "measure.py"), ["--input", str(SAMPLE_INPUT), "--schema", str(SAMPLE_SCHEMA)]],
             *[[f"exit{c}", str(p), []] for c, p in scripts.items()]]
    done = subprocess.run([sys.executable, "-c", _EXECUTE, json.dumps(cases)], env=airflow_env(home),
                          capture_output=True, text=True, timeout=600, cwd=home)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads([out for out in done.stdout.splitlines() if out.startswith("RESULT")][-1][len("RESULT"):])
    assert result == {"usage": "failed, no retry", "exit3": "failed, no retry", "exit4": "failed, no retry",
                      "exit1": "retryable AirflowException"}, result


def test_jobs_scripts_call_the_cli_with_their_step():
    for step in ("run", "measure", "synthesize", "evaluate", "budget", "sample"):
        done = subprocess.run([sys.executable, str(JOBS_DIR / f"{step}.py"), "--help"], capture_output=True,
                              text=True, timeout=120, cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert f"privsyn-spark {step}" in done.stdout
        if step in ("run", "synthesize", "sample"):  # a people schema's flags reach the CLI through the jobs
            assert "--persons-output" in done.stdout and "--people N" in done.stdout


@pytest.mark.airflow
@pytest.mark.slow
def test_dag_runs_end_to_end_on_local_spark(spark, tmp_path, airflow_home):
    """`airflow dags test` (temporary AIRFLOW_HOME, SQLite) runs measure -> synthesize -> evaluate
    with spark-submit on local[2] and writes the synthetic Delta table; the ledger charges the run once."""
    import gzip

    from privsyn_spark.budget.ledger import dataset_state, set_budget

    home, work = airflow_home, tmp_path / "work"
    env = airflow_env(home)
    work.mkdir()
    data = work / "adult.csv"  # the sample's first 5,000 rows: the steps' wiring needs no more
    with gzip.open(SAMPLE_INPUT, "rt") as sample:
        data.write_text("".join(next(sample) for _ in range(5001)))  # the header and 5,000 rows, as written
    output, ledger = work / "synthetic", work / "ledger"
    set_budget(spark, str(ledger), "adult", 3.0, 1e-9)
    conf = {"input": str(data), "output": str(output), "runs_dir": str(work / "runs"), "ledger": str(ledger),
            "dataset_id": "adult", "seed": 7}
    done = subprocess.run([str(VENV_AIRFLOW), "dags", "test", "privsyn_spark", "2024-01-02",
                           "--conf", json.dumps(conf)], env=env, capture_output=True, text=True, timeout=1800,
                          cwd=home)
    log = done.stdout + done.stderr
    (tmp_path / "dags_test.log").write_text(log)
    assert done.returncode == 0, log[-6000:]
    assert (output / "_delta_log").is_dir()
    table = spark.read.format("delta").load(str(output))
    assert table.count() > 1000
    assert set(table.columns) >= {"age", "workclass", "education", "income"}
    runs = [p.name for p in (work / "runs").iterdir()]
    assert len(runs) == 1 and runs[0].startswith("manual__"), runs  # the Airflow run id, folder-safe
    assert (work / "runs" / runs[0] / "measurements").is_dir()
    assert (work / "runs" / runs[0] / "operator" / "report.json").exists()  # the evaluate task
    state = dataset_state(spark, str(ledger), "adult")
    assert [(r.run_id, r.status) for r in state.reservations] == [(runs[0], "committed")], \
        "the measure step did not record its release in the budget ledger"
    report = json.loads((work / "runs" / runs[0] / "operator" / "report.json").read_text())
    assert report["budget"]["dataset_ledger"]["spent_rho"] == pytest.approx(state.reservations[0].rho)

    # a retry of the measure task (same Airflow run id, even from another runs dir) reuses the
    # measurements the ledger points to and is not charged again
    from privsyn_spark.cli.entry import build_parser, config_from_args, validate_run_args
    from privsyn_spark.cli.pipeline import run_measure

    args = build_parser().parse_args([
        "measure", "--input", str(data), "--schema", str(SAMPLE_SCHEMA), "--run-id", runs[0],
        "--runs-dir", str(work / "elsewhere"), "--ledger", str(ledger), "--dataset-id", "adult"])
    validate_run_args(args)
    artifact = work / "runs" / runs[0] / "measurements" / "measurements.npz"
    before = artifact.stat().st_mtime_ns
    run_measure(spark, config_from_args(args))
    assert artifact.stat().st_mtime_ns == before
    assert (work / "elsewhere" / runs[0] / "measurements" / "measurements.npz").read_bytes() == artifact.read_bytes()
    assert len(dataset_state(spark, str(ledger), "adult").reservations) == 1
