"""Partition-scoped runs on real partitioned tables: only the partition's files are read, the output
partition is replaced (replaceWhere) under rerun and backfill, provenance names it, `sample` re-samples
without reading any input or charging anything."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from privsyn_spark.api import SAMPLE_SCHEMA
from privsyn_spark.cli import main
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.input_scope import Scope
from tests.partition.conftest import DAYS, run_args, write_days
from tests.people_tables import log_messages

deltalake = pytest.importorskip("deltalake")


def _partition_files(table: Path, day: str) -> set[str]:
    return {p.name for p in (table / f"day={day}").glob("*.parquet")}


def _files_read(df) -> int:
    """Execute ``df``'s physical plan and sum its file scans' "number of files read" metric."""
    plan = df._jdf.queryExecution().executedPlan()
    plan.executeCollect()
    leaves = plan.collectLeaves()
    return sum(int(leaves.apply(i).metrics().apply("numFiles").value()) for i in range(leaves.size()))


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_a_partition_value_prunes_the_files_scanned(spark, tmp_path, caplog, fmt):
    table = write_days(spark, tmp_path / "events", fmt=fmt, rows=50)
    raw = spark.read.format(fmt).load(str(table))
    scoped = Scope.parse(["day=2024-01-02"]).apply(raw)
    plan = scoped._jdf.queryExecution().executedPlan().toString()
    assert "PartitionFilters: [isnotnull(day" in plan and "= 2024-01-02)]" in plan, plan
    in_day = len(list((table / "day=2024-01-02").glob("*.parquet")))
    assert 0 < in_day < len(list(table.glob("day=*/*.parquet")))
    assert _files_read(scoped) == in_day and _files_read(raw) > in_day
    if fmt == "delta":  # Delta's file index lists the pruned files
        files = scoped.inputFiles()
        assert len(files) == in_day and all("day=2024-01-02" in f for f in files), files
    assert scoped.count() == 50
    with caplog.at_level(logging.WARNING, logger="privsyn_spark"):
        assert Scope.parse(["gender=Male"]).apply(raw).count() > 0  # still filters
    assert "not a partition column of the input" in caplog.text and "full scan" in caplog.text
    for scope, message in ((((), "no_such > 1"), "no_such"), ((("nope=1",), None), "has no column 'nope'"),
                           (((), "age >"), "--where 'age >'")):
        with pytest.raises(UsageError, match=message) as err:  # analysed up front: before anything is spent
            Scope.parse(*scope).apply(raw)
        assert len(str(err.value).splitlines()) == 1


def test_a_scoped_run_reads_no_other_partition(spark, daily, tmp_path):
    """The other days' data files are overwritten with garbage: a scoped run does not notice (it never
    opens them), while reading the whole table fails."""
    table = tmp_path / "events"
    shutil.copytree(daily, table)
    for day in (DAYS[0], DAYS[2]):
        for f in (table / f"day={day}").glob("*.parquet"):
            f.write_bytes(b"not parquet at all")
    with pytest.raises(Exception):  # noqa: B017 - Spark's own error for a corrupt file
        spark.read.format("delta").load(str(table)).select("age").collect()
    assert main(run_args(table, tmp_path, "--no-ledger", "--partition", f"day={DAYS[1]}", "--run-id", "d2")) == 0
    out = spark.read.format("delta").load(str(tmp_path / "synthetic"))
    assert {r["day"].isoformat() for r in out.select("day").distinct().collect()} == {DAYS[1]}


@pytest.fixture(scope="module")
def backfill(spark, daily, tmp_path_factory):
    """Three daily runs (a backfill) on a shared budget, then a rerun of the middle day."""
    from privsyn_spark.budget.ledger import set_budget

    work = tmp_path_factory.mktemp("backfill")
    ledger = str(work / "ledger")
    set_budget(spark, ledger, "events", 4.0, 1e-9)
    out = work / "synthetic"
    snapshots = []
    for day in (*DAYS, DAYS[1]):
        args = run_args(daily, work, "--ledger", ledger, "--dataset-id", "events", "--partition", f"day={day}",
                        "--run-id", f"events.day_{day}", "--seed", "3", "--mode", "overwrite")
        assert main(args) == 0
        snapshots.append({d: _partition_files(out, d) for d in DAYS})
    return work, ledger, out, snapshots


def test_rerun_and_backfill_replace_exactly_their_partition(spark, backfill):
    work, ledger, out, snapshots = backfill
    dt = deltalake.DeltaTable(str(out))
    history = sorted(dt.history(), key=lambda c: c["version"])
    assert [c["version"] for c in history] == [0, 1, 2, 3, 4]
    assert history[0]["operation"].startswith("CREATE TABLE")  # empty, partitioned by day
    assert deltalake.DeltaTable(str(out), version=0).to_pandas().empty
    writes = history[1:]
    assert all(c["operation"] == "WRITE" for c in writes)
    predicates = [str(c["operationParameters"]["predicate"]) for c in writes]  # replaceWhere: that day only
    assert all(f"DATE '{d}'" in p for p, d in zip(predicates, (*DAYS, DAYS[1]), strict=True)), predicates
    metadata = [json.loads(c["userMetadata"]) for c in writes]
    assert [m["privsyn.partition"] for m in metadata] == [f"day={d}" for d in (*DAYS, DAYS[1])]
    assert [m["privsyn.run_id"] for m in metadata] == [f"events.day_{d}" for d in (*DAYS, DAYS[1])]
    assert dt.metadata().partition_columns == ["day"]
    # the backfill wrote each day once, leaving the earlier days' files alone; the rerun replaced only its day
    assert snapshots[1][DAYS[0]] == snapshots[0][DAYS[0]] and snapshots[2][DAYS[0]] == snapshots[0][DAYS[0]]
    assert snapshots[3][DAYS[0]] == snapshots[2][DAYS[0]] and snapshots[3][DAYS[2]] == snapshots[2][DAYS[2]]
    live = {Path(p).parent.name: Path(p).name for p in dt.file_uris()}
    assert set(live) == {f"day={d}" for d in DAYS}
    table = dt.to_pandas()
    assert table.groupby(table["day"].astype(str)).size().to_dict() == {d: 300 for d in DAYS}  # no day twice
    # the same run id and seed: the rerun's rows equal the first run's (its noise reused, not redrawn)
    first = spark.read.format("delta").option("versionAsOf", 2).load(str(out)).where(f"day = '{DAYS[1]}'")
    again = spark.read.format("delta").load(str(out)).where(f"day = '{DAYS[1]}'")
    def ordered(rows):  # nulls sort first (a synthetic null beside a value cannot be compared with it)
        return sorted(map(tuple, rows), key=lambda r: tuple((v is not None, str(v)) for v in r))

    assert ordered(first.collect()) == ordered(again.collect())


def test_the_ledger_and_provenance_name_the_partition(spark, backfill, capsys):
    from privsyn_spark.budget.ledger import dataset_state

    work, ledger, out, _ = backfill
    state = dataset_state(spark, ledger, "events")
    assert [(r.run_id, r.partition, r.status) for r in state.reservations] == [
        (f"events.day_{d}", {"day": d}, "committed") for d in DAYS]  # the rerun charged nothing
    assert main(["provenance", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("partition=")[1].split()[0] for line in lines[:4]] == [
        f"day={d}" for d in (DAYS[1], DAYS[2], DAYS[1], DAYS[0])]


@pytest.fixture
def no_input(monkeypatch):
    """Every way of reading a table raises: a re-sample must not read any."""
    from pyspark.sql.readwriter import DataFrameReader

    import privsyn_spark.measure.input_codes as input_codes
    import privsyn_spark.runtime.input_table as input_table

    def refuse(*args, **kwargs):
        raise AssertionError("an input was read")

    for name in ("load", "parquet", "csv", "table", "json", "orc"):
        monkeypatch.setattr(DataFrameReader, name, refuse)
    monkeypatch.setattr(input_table, "read_table", refuse)
    monkeypatch.setattr(input_codes.InputCodes, "raw", refuse)


def test_sample_reads_no_input_and_charges_nothing(spark, backfill, tmp_path, no_input):
    from privsyn_spark.budget.ledger import read_ledger

    work, ledger, _, _ = backfill
    rows_before = read_ledger(spark, ledger).count()
    out = tmp_path / "resampled"
    common = ["--schema", SAMPLE_SCHEMA, "--runs-dir", str(work / "runs"), "--output", str(out), "--rows", "200"]
    assert main(["sample", "--from-run", "latest", "--ledger", ledger, "--dataset-id", "events", *common,
                 "--partition", "day=2024-01-09", "--seed", "5"]) == 0
    assert main(["sample", "--from-run", f"events.day_{DAYS[0]}", *common, "--partition", "day=2024-01-10"]) == 0
    assert read_ledger(spark, ledger).count() == rows_before  # nothing charged, nothing recorded
    dt = deltalake.DeltaTable(str(out))
    table = dt.to_pandas()
    assert table.groupby(table["day"].astype(str)).size().to_dict() == {"2024-01-09": 200, "2024-01-10": 200}
    history = sorted(dt.history(), key=lambda c: c["version"])
    meta = [json.loads(c["userMetadata"]) for c in history[1:]]
    assert [(m["privsyn.mode"], m["privsyn.resampled_from"], m["privsyn.partition"]) for m in meta] == [
        ("resample", f"events.day_{DAYS[2]}", "day=2024-01-09"),  # latest: the last committed run
        ("resample", f"events.day_{DAYS[0]}", "day=2024-01-10")]


def test_sample_from_a_saved_model(spark, backfill, tmp_path, no_input):
    from privsyn_spark.cli.resample import SampleConfig, load_model

    work, _, _, _ = backfill
    model = load_model(spark, SampleConfig(output="-", from_run=f"events.day_{DAYS[0]}", schema=SAMPLE_SCHEMA,
                                           runs_dir=str(work / "runs")))
    model.synthesizer = "pgm"
    model.save(str(tmp_path / "model"))
    chosen, said = {}, []
    for given in ([], ["--synthesizer", "gum"]):  # not given: the saved choice; given: it overrides
        out = tmp_path / f"from_model{len(given)}"
        with log_messages() as messages:
            assert main(["sample", "--model", str(tmp_path / "model"), "--output", str(out), "--rows", "150",
                         *given]) == 0
        said += [m for m in messages if m.startswith("sampling with")]
        table = deltalake.DeltaTable(str(out))
        assert table.to_pandas().shape[0] == 150
        chosen[len(given)] = json.loads(table.history(1)[0]["userMetadata"])["privsyn.synthesizer"]
    assert chosen == {0: "pgm", 2: "gum"}
    assert said == ["sampling with pgm (the model's saved choice)",
                    "sampling with gum (--synthesizer given; the model was saved with pgm)"]
