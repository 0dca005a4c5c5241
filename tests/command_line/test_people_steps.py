"""The steps of a people run one at a time: `measure` charges once, `synthesize` samples persons and their rows
from the measured run, `evaluate` writes the run report with the people metrics, `sample --from-run` writes new
persons and rows charging nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from privsyn_spark.cli.people_steps import people_columns
from privsyn_spark.errors import EXIT_USAGE
from privsyn_spark.people_model import load_people
from privsyn_spark.schema.schema import parse_schema
from tests.command_line.test_bad_input import one_error_line
from tests.command_line.test_people_cli import cli
from tests.people_tables import PEOPLE, keyed_table, people_doc


def _step(step: str, tmp_path: Path, *extra: str) -> list[str]:
    return [step, "--input", str(tmp_path / "orders.csv"), "--schema", str(tmp_path / "schema.yaml"),
            "--epsilon", "8", "--ledger", str(tmp_path / "ledger"), "--dataset-id", "orders", "--run-id", "steps",
            "--runs-dir", str(tmp_path / "runs"), "--master", "local[2]", *extra]


@pytest.mark.slow
def test_measure_synthesize_evaluate_of_a_people_schema(spark, tmp_path):
    from privsyn_spark.budget.ledger import dataset_state, set_budget

    keyed_table(50, seed=6).to_csv(tmp_path / "orders.csv", index=False)
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(people_doc()))
    set_budget(spark, str(tmp_path / "ledger"), "orders", 20.0, 1e-9, privacy_unit="customer_id")
    for _ in range(2):  # the second measure reuses the run's measurements: charged once
        result = cli(_step("measure", tmp_path))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "people measurements in" in result.stdout
    state = dataset_state(spark, str(tmp_path / "ledger"), "orders")
    assert [(r.run_id, r.status) for r in state.reservations] == [("steps", "committed")]

    outputs = ["--output", str(tmp_path / "rows"), "--persons-output", str(tmp_path / "persons")]
    missing = cli(_step("synthesize", tmp_path, "--output", str(tmp_path / "rows")))
    assert missing.returncode == EXIT_USAGE and "--persons-output" in one_error_line(missing.stderr)
    result = cli(_step("synthesize", tmp_path, *outputs, "--people", "12"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote synthetic persons to" in result.stdout
    persons = spark.read.format("delta").load(str(tmp_path / "persons")).toPandas()  # synthetic tables
    rows = spark.read.format("delta").load(str(tmp_path / "rows")).toPandas()
    assert len(persons) == 12 and persons.customer_id.is_unique
    assert set(rows.customer_id) <= set(persons.customer_id) and len(rows) > 0
    assert not any("REALID" in str(k) for k in [*persons.customer_id, *rows.customer_id])
    saved = load_people(str(tmp_path / "runs" / "steps" / "release"), spark)  # release/: what may be handed on
    assert saved is not None and saved.run_id == "steps"
    assert (tmp_path / "runs" / "steps" / "README.txt").exists()
    joined = rows.merge(persons, on="customer_id", suffixes=("", "_p"))
    assert len(joined) == len(rows) and (joined.segment == joined.segment_p).all()

    result = cli(_step("evaluate", tmp_path, *outputs))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "runs" / "steps" / "operator" / "report.json").read_text())
    assert 0 <= report["metrics"]["people"]["rows_per_person_tvd"] <= 1
    assert report["budget"]["dataset_ledger"]["spent_rho"] == pytest.approx(state.reservations[0].rho)
    assert "REALID" not in result.stdout + result.stderr
    assert len(dataset_state(spark, str(tmp_path / "ledger"), "orders").reservations) == 1

    sample = ["sample", "--from-run", "steps", "--schema", str(tmp_path / "schema.yaml"), "--ledger",
              str(tmp_path / "ledger"), "--dataset-id", "orders", "--runs-dir", str(tmp_path / "runs"), "--master",
              "local[2]", "--output", str(tmp_path / "rows2")]
    missing = cli(sample)
    assert missing.returncode == EXIT_USAGE and "--persons-output" in one_error_line(missing.stderr)
    result = cli([*sample, "--persons-output", str(tmp_path / "persons2"), "--people", "8", "--seed", "3"])
    assert result.returncode == 0, result.stderr[-3000:]
    again = spark.read.format("delta").load(str(tmp_path / "persons2")).toPandas()
    again_rows = spark.read.format("delta").load(str(tmp_path / "rows2"))
    assert len(again) == 8 and set(again.customer_id).isdisjoint(persons.customer_id)  # fresh keys
    assert again_rows.join(spark.createDataFrame(again[["customer_id"]]), "customer_id", "left_anti").count() == 0
    meta = spark.sql(f"DESCRIBE DETAIL delta.`{tmp_path / 'rows2'}`").first().properties
    assert (meta["privsyn.mode"], meta["privsyn.resampled_from"]) == ("resample", "steps")
    assert len(dataset_state(spark, str(tmp_path / "ledger"), "orders").reservations) == 1  # nothing charged


def test_the_report_shares_one_value_of_the_first_categorical_summary():
    for summaries, one_value in ((["amount", "channel"], "channel"), (["amount"], "channel"), ([], "channel")):
        columns = people_columns(parse_schema(people_doc({**PEOPLE, "summaries": summaries})))
        assert columns is not None and (columns.one_value, columns.amount) == (one_value, "amount"), summaries
