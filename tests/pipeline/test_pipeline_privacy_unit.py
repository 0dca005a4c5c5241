"""A person as the privacy unit, end to end through the CLI's run step: the dataset's budget is set for
the unit and a run with another unit is refused (exit 2) before any spend; K < 1 and a missing id
column are one-line errors before Spark starts or before any budget; the ledger rows, the artifact
and the report record the unit and K; the id column and its values appear in no output column or
row, log line, report or table property."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark.budget import ledger as L
from privsyn_spark.cli import entry as cli
from privsyn_spark.cli import pipeline
from privsyn_spark.errors import EXIT_USAGE, UsageError
from privsyn_spark.sample.generator import people_schema

pytestmark = pytest.mark.slow

MARK = "PIDX7Q"  # every id value carries it: any leak of an id is found by a substring search


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """800 people with 1..60 rows each (heavy-tailed), string ids, as CSV; its schema with K = 5."""
    root = tmp_path_factory.mktemp("people")
    rng = np.random.default_rng(4)
    sizes = np.minimum(60, rng.zipf(1.6, 800))
    pid = np.repeat([f"{MARK}-{i:05d}" for i in range(800)], sizes)
    n = pid.size
    segment = np.repeat(rng.integers(0, 5, 800), sizes)
    frame = pd.DataFrame({"person_id": pid, "age_band": np.repeat(rng.integers(0, 8, 800), sizes),
                          "region": rng.integers(0, 10, n), "segment": segment,
                          "channel": (segment + rng.integers(0, 2, n)) % 6, "category": rng.integers(0, 12, n),
                          "amount_band": rng.integers(0, 10, n), "weekday": rng.integers(0, 7, n)})
    frame.to_csv(root / "people.csv", index=False)
    (root / "schema.yaml").write_text(yaml.safe_dump(people_schema(5)))
    (root / "rows.yaml").write_text(yaml.safe_dump(people_schema()))
    return root


def _args(people, step, run_id, runs, *extra, schema="schema.yaml"):
    return cli.build_parser().parse_args([step, "--input", str(people / "people.csv"), "--schema",
                                          str(people / schema), "--output", str(runs / "out" / run_id),
                                          "--run-id", run_id, "--runs-dir", str(runs), *extra])


def test_k_below_one_is_a_one_line_error_before_spark(people, tmp_path, capsys):
    for bad in ("0", "-2"):
        code = cli.main(["run", "--input", str(people / "people.csv"), "--schema", str(people / "schema.yaml"),
                         "--output", str(tmp_path / "o"), "--no-ledger", "--max-rows-per-id", bad,
                         "--master", "spark://127.0.0.1:1"])  # never reached: the check runs before Spark
        err = capsys.readouterr().err.strip()
        assert code == EXIT_USAGE and len(err.splitlines()) == 1 and "max_rows_per_id must be" in err
    code = cli.main(["run", "--input", str(people / "people.csv"), "--schema", str(people / "rows.yaml"),
                     "--output", str(tmp_path / "o"), "--no-ledger", "--privacy-id", "age_band",
                     "--master", "spark://127.0.0.1:1"])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and len(err.splitlines()) == 1 and "never synthesized" in err


def test_a_person_unit_run_end_to_end(spark, people, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    ledger, runs = str(tmp_path / "ledger"), tmp_path / "runs"
    L.set_budget(spark, ledger, "people", 4.0, 1e-9, privacy_unit="person_id")
    led = ["--ledger", ledger, "--dataset-id", "people", "--gum-rounds", "2"]

    # a row-level run on a person-level budget: refused before anything is charged
    args = _args(people, "run", "rows", runs, *led, schema="rows.yaml")
    cli.validate_run_args(args)
    with pytest.raises(L.UnitMismatch, match="budget is set for the person of id 'person_id'") as err:
        pipeline.run(spark, cli.config_from_args(args))
    assert err.value.exit_code == EXIT_USAGE and len(str(err.value).splitlines()) == 1
    # a missing id column: refused before anything is charged
    args = _args(people, "run", "missing", runs, *led, "--privacy-id", "customer_id", schema="rows.yaml")
    cli.validate_run_args(args)
    with pytest.raises(UsageError, match=r"privacy id column\(s\) \['customer_id'\] not in the input table"):
        pipeline.run(spark, cli.config_from_args(args))
    assert L.dataset_state(spark, ledger, "people").spent_rho == 0.0

    args = _args(people, "run", "persons", runs, *led, "--epsilon", "2")
    cli.validate_run_args(args)
    report = pipeline.run(spark, cli.config_from_args(args))

    rows = [r.asDict() for r in L.read_ledger(spark, ledger, "people").collect()]
    assert {(r["kind"], r["privacy_unit"]) for r in rows} >= {("budget", "person_id"), ("reserve", "person_id")}
    assert [r["max_rows_per_id"] for r in rows if r["kind"] == "reserve"] == [5]
    unit = report["privacy_unit"]
    assert (unit["privacy_unit"], unit["max_rows_per_id"]) == ("person_id", 5)
    frame = pd.read_csv(people / "people.csv")
    per_id = frame.groupby("person_id").size()
    bounding = unit["bounding"]
    assert bounding["rows"] == len(frame) and bounding["rows_kept"] == int(per_id.clip(upper=5).sum())
    assert bounding["ids"] == len(per_id) and bounding["ids_truncated"] == int((per_id > 5).sum())
    assert bounding["private"] is False and "warning" in bounding  # heavy tail: well over 10 % dropped
    assert all(e["max_rows_per_id"] == 5 and e["privacy_unit"] == "person_id" for e in report["budget"]["ledger"])

    out = spark.read.format("delta").load(str(runs / "out" / "persons"))
    assert "person_id" not in out.columns and set(out.columns) == set(frame.columns) - {"person_id"}
    assert not any(MARK in str(v) for row in out.limit(5000).collect() for v in row)
    shown = spark.sql(f"SHOW TBLPROPERTIES delta.`{runs / 'out' / 'persons'}`").collect()
    props = {r["key"]: r["value"] for r in shown}
    assert props["privsyn.max_rows_per_id"] == "5" and props["privsyn.privacy_unit"] == "person"
    assert not any("person_id" in f"{k}={v}" or MARK in v for k, v in props.items())
    texts = [json.dumps(report, default=str), (runs / "persons" / "operator" / "report.json").read_text(),
             (runs / "persons" / "operator" / "report.html").read_text(),
             "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)]
    assert not any(MARK in t for t in texts)
    # the default output size: the noisy total of the bounded rows (not of all rows)
    assert abs(report["synthesis"]["rows"] - bounding["rows_kept"]) < 0.2 * bounding["rows_kept"]


def test_an_old_ledger_without_the_unit_columns_is_read_and_upgraded(spark, tmp_path):
    from datetime import datetime

    from privsyn_spark.budget.ledger_table import _FIRST_COLUMNS, LEDGER_COLUMNS
    from privsyn_spark.privacy.accounting import rho_from_eps_delta
    from privsyn_spark.privacy.unit import PrivacyUnit

    old = ", ".join(LEDGER_COLUMNS.split(", ")[:_FIRST_COLUMNS])  # a ledger of the previous version
    ledger = str(tmp_path / "old-ledger")
    rho = rho_from_eps_delta(2.0, 1e-9)
    row = ("d", 1, "budget", None, rho, 2.0, 1e-9, None, None, None, None, datetime(2026, 1, 1))
    spark.createDataFrame([row], old).write.format("delta").save(ledger)
    state = L.dataset_state(spark, ledger, "d")  # read as it is: a row-level budget
    assert state.budget is not None and state.budget.privacy_unit == "row"
    with pytest.raises(L.UnitMismatch, match="set for one row as the privacy unit"):
        L.reserve(spark, ledger, "d", "r1", rho=rho / 4, epsilon=0.5, delta=1e-9, fingerprint={}, artifact="a",
                  unit=PrivacyUnit(("pid",), 3))
    held = L.reserve(spark, ledger, "d", "r2", rho=rho / 4, epsilon=0.5, delta=1e-9, fingerprint={}, artifact="a")
    assert held.charged
    rows = [r.asDict() for r in L.read_ledger(spark, ledger, "d").collect()]
    assert [(r["kind"], r["privacy_unit"], r["max_rows_per_id"]) for r in sorted(rows, key=lambda r: r["seq"])] == [
        ("budget", None, None), ("reserve", "row", 1)]
    with pytest.raises(UsageError, match="its unit cannot change"):
        L.set_budget(spark, ledger, "d", 2.0, 1e-9, replace=True, privacy_unit="pid")
    L.set_budget(spark, ledger, "e", 2.0, 1e-9, privacy_unit="pid")
    assert L.dataset_state(spark, ledger, "e").budget.privacy_unit == "pid"


def test_null_ids_are_counted_for_the_operator_and_dropped_on_request(spark, people, tmp_path, caplog):
    """A table with 6 % of its ids missing and a schema declaring ``null_ids: drop``: the run's operator
    report counts the null-id rows (exact, NOT private), says they were dropped and warns above 1 %; the
    log only points to that report (no tally)."""
    caplog.set_level(logging.INFO)
    frame = pd.read_csv(people / "people.csv")
    missing = np.random.default_rng(5).random(len(frame)) < 0.06
    frame.loc[missing, "person_id"] = None
    frame.to_csv(tmp_path / "nulls.csv", index=False)
    doc = people_schema(5)
    doc["privacy_unit"]["null_ids"] = "drop"
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(doc))
    runs = tmp_path / "runs"
    args = cli.build_parser().parse_args(["run", "--input", str(tmp_path / "nulls.csv"), "--schema",
                                          str(tmp_path / "schema.yaml"), "--output", str(runs / "out"),
                                          "--run-id", "nulls", "--runs-dir", str(runs), "--no-ledger",
                                          "--gum-rounds", "2"])
    cli.validate_run_args(args)
    report = pipeline.run(spark, cli.config_from_args(args))
    bounding = report["privacy_unit"]["bounding"]
    per_id = frame.dropna(subset=["person_id"]).groupby("person_id").size()
    assert (bounding["null_id_rows"], bounding["null_ids"], bounding["rows"]) == (int(missing.sum()), "drop",
                                                                                  len(frame))
    assert bounding["rows_kept"] == int(per_id.clip(upper=5).sum())
    assert "have a null privacy id" in bounding["warning"] and "they were dropped" in bounding["warning"]
    on_disk = json.loads((runs / "nulls" / "operator" / "report.json").read_text())
    assert on_disk["privacy_unit"]["bounding"]["null_id_rows"] == int(missing.sum())
    assert "have a null privacy id" in (runs / "nulls" / "operator" / "report.html").read_text()
    pointer = [r.getMessage() for r in caplog.records if "contribution bounding" in r.getMessage()]
    assert pointer and not any(ch.isdigit() for m in pointer for ch in m), pointer
