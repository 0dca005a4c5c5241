"""The DAG as a warehouse job: each DAG run scoped to its day's partition. The tasks' arguments are
rendered by the DAG itself (DagBag, as Airflow renders them) for a 7-day backfill, then run as the
spark-submit jobs would run them (the CLI, in this process's Spark session): 7 partitions, 7
reservations, each partition written once; a retried day reuses its measurements; the budget check
fails on the day the budget runs out, before the measure task."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date, timedelta

import pytest

from tests.jobs.conftest import DAGS_DIR, airflow_env
from tests.partition.conftest import write_days

pytest.importorskip("airflow", reason="the airflow extra is not installed")
deltalake = pytest.importorskip("deltalake")

DAYS = tuple((date(2024, 1, 1) + timedelta(days=i)).isoformat() for i in range(8))

_RENDER = textwrap.dedent(f"""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    import jinja2
    bag = DagBag(dag_folder={str(DAGS_DIR)!r})
    dag = bag.dags["privsyn_spark"]
    conf, days = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update(dag.user_defined_filters or {{}})
    params = {{k: dag.params[k] for k in dag.params}} | conf
    out = {{}}
    for ds in days:
        run_id = "backfill__" + ds + "T00:00:00+00:00"
        out[ds] = {{t.task_id: [env.from_string(a).render(params=params, run_id=run_id, ds=ds)
                                for a in t.application_args] for t in dag.tasks if hasattr(t, "application")}}
        out[ds]["mode"] = dag.get_task("mode").python_callable(params)
        sensor = dag.get_task("wait_for_partition")
        kwargs = {{k: env.from_string(v).render(params=params, ds=ds) for k, v in sensor.op_kwargs.items()}}
        out[ds]["landed"] = sensor.python_callable(**kwargs)
    print("RESULT" + json.dumps(out))
""")


def _render(tmp_path, conf: dict, days) -> dict:
    home = tmp_path / "airflow"
    home.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", _RENDER, json.dumps(conf), json.dumps(list(days))],
                          env=airflow_env(home), capture_output=True, text=True, timeout=600, cwd=home)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads([o for o in done.stdout.splitlines() if o.startswith("RESULT")][-1][len("RESULT"):])


@pytest.mark.airflow
@pytest.mark.slow
def test_a_seven_day_backfill_writes_each_partition_once_and_charges_each_day_once(spark, tmp_path, capsys):
    from privsyn_spark.budget.ledger import dataset_state, set_budget
    from privsyn_spark.cli import main
    from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta

    table = write_days(spark, tmp_path / "events", days=DAYS, rows=400)
    ledger, output = str(tmp_path / "ledger"), tmp_path / "synthetic"
    set_budget(spark, ledger, "events", eps_from_rho(7.5 * rho_from_eps_delta(1.0, 1e-9), 1e-9), 1e-9)  # 7 days
    conf = {"input": str(table), "output": str(output), "runs_dir": str(tmp_path / "runs"), "ledger": ledger,
            "dataset_id": "events", "partition_column": "day", "seed": 3}
    rendered = _render(tmp_path, conf, (*DAYS, "2024-01-09"))
    assert {r["mode"] for r in rendered.values()} == {"budget_check"}  # mode=fit
    assert [rendered[d]["landed"] for d in DAYS] == [True] * 8  # the sensor before measure: each day has landed
    assert rendered.pop("2024-01-09")["landed"] is False  # a day not landed yet: the DAG run waits
    run_ids = [args[args.index("--run-id") + 1] for args in (rendered[d]["measure"] for d in DAYS)]
    assert run_ids == [f"events.day_{d}" for d in DAYS]  # dataset + partition, not the Airflow run id
    assert all(f"--partition=day={d}" in rendered[d]["synthesize"] for d in DAYS)
    for day in DAYS[:7]:  # the backfill: one DAG run per day, one after the other (max_active_runs=1)
        for task in ("budget_check", "measure", "synthesize"):
            assert main(["budget", *rendered[day][task]] if task == "budget_check" else
                        [task, *rendered[day][task]]) == 0, (day, task)
        log = capsys.readouterr().out
        assert "fits (epsilon=1" in log and "more run(s) at epsilon=1" in log  # the forecast, in the task log
    # a retried / cleared day 3: the same run id, its measurements reused, charged nothing more
    again = _render(tmp_path, conf, [DAYS[2]])[DAYS[2]]
    assert again == rendered[DAYS[2]]
    assert main(["budget", *again["budget_check"]]) == 0 and "already holds" in capsys.readouterr().out
    assert main(["measure", *again["measure"]]) == 0
    state = dataset_state(spark, ledger, "events")
    assert [(r.run_id, r.partition) for r in state.reservations] == [
        (f"events.day_{d}", {"day": d}) for d in DAYS[:7]]
    # day 8: the budget is spent; the DAG run fails in budget_check (exit 3), before measure reads anything
    assert main(["budget", *rendered[DAYS[7]]["budget_check"]]) == 3
    assert "exhausted" in capsys.readouterr().err
    dt = deltalake.DeltaTable(str(output))
    writes = [c for c in dt.history() if c["operation"] == "WRITE"]
    parts = [json.loads(c["userMetadata"])["privsyn.partition"] for c in writes]
    assert sorted(parts) == [f"day={d}" for d in DAYS[:7]]  # no partition written twice
    assert sorted({str(d) for d in dt.to_pandas()["day"]}) == list(DAYS[:7])
    # resample mode: the same DAG writes day 8 from the latest fitted run, reading nothing, charging nothing
    resample = _render(tmp_path, {**conf, "mode": "resample"}, [DAYS[7]])[DAYS[7]]
    assert resample["mode"] == "sample"
    rows_before = len(state.reservations)
    assert main(["sample", *resample["sample"]]) == 0
    assert len(dataset_state(spark, ledger, "events").reservations) == rows_before
    last = sorted(deltalake.DeltaTable(str(output)).history(), key=lambda c: c["version"])[-1]
    meta = json.loads(last["userMetadata"])
    assert (meta["privsyn.mode"], meta["privsyn.partition"], meta["privsyn.resampled_from"]) == (
        "resample", f"day={DAYS[7]}", f"events.day_{DAYS[6]}")
