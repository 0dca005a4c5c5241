"""A spark-submit run's driver log at default settings holds the tool's lines, not Spark's INFO: submit.sh
and the Airflow DAG give the driver deploy/spark/log4j2.properties (Spark's own loggers at WARN)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.command_line.test_bad_input import Case
from tests.jobs.conftest import DAGS_DIR, REPO, airflow_env, base_env, delta_jars

LOG4J = REPO / "deploy" / "spark" / "log4j2.properties"


@pytest.mark.slow
def test_a_submitted_run_logs_under_200_lines(tmp_path):
    delta_jars()  # the Delta jars setup.sh resolved (submit.sh passes them)
    case = Case(tmp_path)
    args = ["--input", str(case.input), "--schema", str(case.schema), "--output", str(case.output),
            "--runs-dir", str(case.runs), "--run-id", "submitted", "--no-ledger", "--epsilon", "1"]
    done = subprocess.run([str(REPO / "deploy" / "spark" / "submit.sh"), "run", *args], capture_output=True,
                          text=True, timeout=1200, cwd=tmp_path,
                          env=base_env(SPARK_MASTER="local[2]", PRIVSYN_SUBMIT_ARGS="--conf spark.ui.enabled=false"))
    log = done.stdout + done.stderr
    (tmp_path / "driver.log").write_text(log)
    assert done.returncode == 0, log[-5000:]
    assert (case.output / "_delta_log").is_dir() and (case.runs / "submitted" / "operator" / "report.json").exists()
    lines = log.splitlines()
    assert len(lines) < 200, f"{len(lines)} lines:\n" + "\n".join(lines[:60])
    assert not [line for line in lines if " INFO " in line and "privsyn" not in line], log[-5000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("privsyn-spark: run done: wrote ")]


_DAG_CONF = textwrap.dedent(f"""
    import json
    from airflow.dag_processing.dagbag import DagBag
    dag = DagBag(dag_folder={str(DAGS_DIR)!r}).dags["privsyn_spark"]
    print("RESULT" + json.dumps({{t.task_id: t.conf for t in dag.tasks if hasattr(t, "application")}}))
""")


def test_every_dag_task_gives_its_driver_the_log_configuration(tmp_path):
    pytest.importorskip("airflow", reason="the airflow extra is not installed")
    done = subprocess.run([sys.executable, "-c", _DAG_CONF], env=airflow_env(tmp_path), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    confs = json.loads([out for out in done.stdout.splitlines() if out.startswith("RESULT")][-1][len("RESULT"):])
    assert set(confs) == {"budget_check", "measure", "synthesize", "evaluate", "sample"}
    wanted = f"-Dlog4j2.configurationFile=file:{LOG4J}"
    assert all(conf["spark.driver.extraJavaOptions"] == wanted for conf in confs.values()), confs
    assert "rootLogger.level = warn" in LOG4J.read_text()
