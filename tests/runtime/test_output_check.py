"""Where a run writes: run ids, output locations and append schemas, checked before any budget is spent."""

from __future__ import annotations

import pytest

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.output_check import check_output_path, check_output_table, check_run_id
from privsyn_spark.runtime.scratch import run_scratch


@pytest.mark.parametrize("run_id", ["../escaped", "a/b", "a\\b", "..", ".", "", " padded", "tab\tid"])
def test_unsafe_run_ids_are_refused(run_id):
    with pytest.raises(UsageError, match="is not a safe folder name"):
        check_run_id(run_id)


@pytest.mark.parametrize("run_id", ["2026-12-01", "manual__2026-12-01T09:00:00+00:00", "a..b", "r1"])
def test_scheduler_run_ids_are_accepted(run_id):
    check_run_id(run_id)


def test_new_empty_and_delta_locations_are_accepted(spark, tmp_path):
    check_output_path(str(tmp_path / "new" / "deeper"), "overwrite")
    (tmp_path / "empty").mkdir()
    check_output_path(str(tmp_path / "empty"), "overwrite")
    check_output_path(f"file://{tmp_path / 'new'}", "overwrite")
    check_output_path("db.synthetic", "append")  # catalog names: left to the table check
    table = str(tmp_path / "table")
    spark.createDataFrame([(1, "x")], "a int, b string").write.format("delta").save(table)
    check_output_table(spark, table, "append", "`a` int, `b` string")
    check_output_table(spark, table, "overwrite", "`c` double")  # overwrite replaces the schema
    with pytest.raises(UsageError, match=r"cannot append.*: b bigint, b string \(in the table only\)"):
        check_output_table(spark, table, "append", "`a` int, `b` bigint")
    assert list(p.name for p in (tmp_path / "table").iterdir() if p.name.startswith(".privsyn")) == []


@pytest.mark.parametrize("keep", [False, True])
def test_checkpoints_are_removed_when_the_run_ends_unless_kept(spark, tmp_path, keep):
    run_dir = tmp_path / "run"
    with run_scratch(spark, str(run_dir / "checkpoints"), keep) as folder:
        spark.sparkContext.setCheckpointDir(folder)
        spark.range(10).checkpoint(eager=True)
        assert any((run_dir / "checkpoints").rglob("rdd-*"))
    assert (run_dir / "checkpoints").exists() == keep
