"""The Airflow DAG on a people schema: the params persons_output and people reach every step, and a real
`airflow dags test` (spark-submit on local[2]) writes the persons and their rows, keys joined."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.jobs.conftest import VENV_BIN, airflow_env

pytest.importorskip("airflow", reason="the airflow extra is not installed")


@pytest.mark.airflow
@pytest.mark.slow
def test_dag_runs_a_people_schema_end_to_end(spark, tmp_path, airflow_home):
    from privsyn_spark.budget.ledger import dataset_state, set_budget
    from privsyn_spark.sample.keyed_people import KEY, SCHEMA_PATH, keyed_people

    home, work = airflow_home, tmp_path / "work"
    env = airflow_env(home)
    orders, ledger = work / "orders", work / "ledger"
    keyed_people(spark, people=1500, seed=3).write.format("delta").save(str(orders))
    set_budget(spark, str(ledger), "orders", 10.0, 1e-9, privacy_unit=KEY)
    conf = {"input": str(orders), "schema": SCHEMA_PATH, "output": str(work / "rows"),
            "persons_output": str(work / "persons"), "people": 200, "runs_dir": str(work / "runs"),
            "ledger": str(ledger), "dataset_id": "orders", "epsilon": 4.0, "seed": 5}
    done = subprocess.run([str(VENV_BIN / "airflow"), "dags", "test", "privsyn_spark", "2024-01-02",
                           "--conf", json.dumps(conf)], env=env, capture_output=True, text=True, timeout=2400,
                          cwd=home)
    log = done.stdout + done.stderr
    (tmp_path / "dags_test.log").write_text(log)
    assert done.returncode == 0, log[-6000:]
    persons = spark.read.format("delta").load(str(work / "persons"))
    rows = spark.read.format("delta").load(str(work / "rows"))
    assert persons.count() == 200 and persons.select(KEY).distinct().count() == 200
    assert rows.join(persons, KEY, "left_anti").count() == 0  # every row's key is a synthetic person's
    assert rows.count() > 200 and rows.select(KEY).distinct().count() > 100
    assert persons.join(keyed_people(spark, people=1500, seed=3).select(KEY).distinct(), KEY).count() == 0
    runs = [p.name for p in (work / "runs").iterdir()]
    assert len(runs) == 1
    report = json.loads((work / "runs" / runs[0] / "operator" / "report.json").read_text())  # the evaluate task
    assert 0 <= report["metrics"]["people"]["rows_per_person_tvd"] <= 1
    state = dataset_state(spark, str(ledger), "orders")
    assert [(r.run_id, r.status) for r in state.reservations] == [(runs[0], "committed")]
