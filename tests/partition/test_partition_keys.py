"""A partition is keyed by its typed value, not its text: two spellings of one partition (date, int,
timestamp, boolean columns) read the same rows, so they share one per-partition budget, and the ledger
and the provenance name the canonical value."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from privsyn_spark.api import SAMPLE_SCHEMA, PrivSyn
from privsyn_spark.budget import ledger as L
from privsyn_spark.cli import main
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.runtime.input_scope import Scope

SPELLINGS = [  # (column, canonical, another spelling of it)
    ("day", "2024-01-02", "2024-1-2"),
    ("day", "2024-01-02", " 2024-01-02"),
    ("n", "5", "05"),
    ("ts", "2024-01-02 00:00:00.000000Z", "2024-01-02T00:00:00Z"),
    ("flag", "true", "TRUE"),
    ("flag", "false", "no"),
]


@pytest.fixture(scope="module")
def typed(spark, tmp_path_factory):
    """A Delta table of 600 Adult rows in two partitions of four typed partition columns (read-only)."""
    import pandas as pd

    from privsyn_spark.api import SAMPLE_DATA

    frame = pd.read_csv(SAMPLE_DATA, nrows=600)
    first = [True] * 300 + [False] * 300
    frame["day"] = [dt.date(2024, 1, 1) if f else dt.date(2024, 1, 2) for f in first]
    frame["n"] = [4 if f else 5 for f in first]
    frame["ts"] = pd.to_datetime(["2024-01-01" if f else "2024-01-02" for f in first], utc=True)
    frame["flag"] = [not f for f in first]
    path = tmp_path_factory.mktemp("typed") / "events"
    spark.createDataFrame(frame).write.format("delta").partitionBy("day", "n", "ts", "flag").save(str(path))
    return path


@pytest.mark.parametrize("column, canonical, spelling", SPELLINGS)
def test_every_spelling_of_a_partition_value_has_one_canonical_text(spark, typed, column, canonical, spelling):
    raw = spark.read.format("delta").load(str(typed))
    for text in (canonical, spelling):
        scope = Scope.parse([f"{column}={text}"]).canonical(raw)
        assert scope.values() == {column: canonical}
        assert scope.apply(raw).count() == 300  # the canonical text selects the partition's rows


@pytest.mark.parametrize("item, message", [
    ("day=2024-13-45", "not a date value"), ("n=five", "not a bigint value"), ("flag=maybe", "not a boolean value"),
    ("ts=2024-01-02 25:00", "not a timestamp")])
def test_a_value_that_does_not_cast_is_a_one_line_usage_error(spark, typed, item, message):
    raw = spark.read.format("delta").load(str(typed))
    with pytest.raises(UsageError, match=message) as err:
        Scope.parse([item]).canonical(raw)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("column, canonical, spelling", [SPELLINGS[0], SPELLINGS[2], SPELLINGS[3], SPELLINGS[4]])
def test_two_spellings_of_one_partition_share_its_budget(spark, typed, tmp_path, column, canonical, spelling):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "events", 1.0, 1e-9, per_partition=column)
    synth = PrivSyn(SAMPLE_SCHEMA, epsilon=1.0, delta=1e-9, ledger=ledger, dataset_id="events",
                    runs_dir=str(tmp_path / "runs"))
    with synth.open(str(typed), run_id="first", scope=Scope.parse([f"{column}={canonical}"])) as codes:
        synth.measure(codes, run_id="first")
    with synth.open(str(typed), run_id="second", scope=Scope.parse([f"{column}={spelling}"])) as codes:
        with pytest.raises(BudgetRefused, match=f"partition {column}={canonical}.*exhausted"):
            synth.measure(codes, run_id="second")
    state = L.dataset_state(spark, ledger, "events")
    assert [r.partition for r in state.reservations] == [{column: canonical}]
    assert list(state.partitions()) == [canonical]


@pytest.mark.slow
def test_the_ledger_and_the_provenance_record_the_canonical_value(spark, typed, tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "events", 2.0, 1e-9, per_partition="day")
    argv = ["run", "--input", str(typed), "--schema", SAMPLE_SCHEMA, "--output", str(tmp_path / "synthetic"),
            "--runs-dir", str(tmp_path / "runs"), "--epsilon", "1", "--no-evaluate", "--rows", "200",
            "--master", "local[2]", "--ledger", ledger, "--dataset-id", "events", "--partition", "day=2024-1-2",
            "--mode", "overwrite"]  # the retry rewrites its partition
    assert main([*argv, "--run-id", "d2"]) == 0
    assert main([*argv, "--run-id", "d2"]) == 0  # a retry spelled the same: reused, nothing charged
    state = L.dataset_state(spark, ledger, "events")
    assert [(r.run_id, r.partition) for r in state.reservations] == [("d2", {"day": "2024-01-02"})]
    assert state.reservations[0].fingerprint["input"].endswith(" [day=2024-01-02]")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'synthetic'}`").orderBy("version").collect()
    metadata = [json.loads(h["userMetadata"]) for h in history if h["userMetadata"]]
    assert [m["privsyn.partition"] for m in metadata] == ["day=2024-01-02", "day=2024-01-02"]
    assert main(["budget", "show", "--ledger", ledger, "--dataset-id", "events"]) == 0
    assert "partition day=2024-01-02:" in capsys.readouterr().out
