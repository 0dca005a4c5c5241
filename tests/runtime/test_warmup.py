"""The background warm-up writes only into its folder, removes it and leaves no thread behind."""

import threading

import pytest

from privsyn_spark.runtime import warmup
from privsyn_spark.runtime.warmup import warm_up
from privsyn_spark.synthesize.sharded.spark_driver import warm_worker
from privsyn_spark.write.delta_output import warm_write

JOBS = (warm_write, warm_worker)  # the pipeline's


@pytest.fixture(autouse=True)
def cold_session(monkeypatch):
    """Each test sees the session as never warmed up (other tests' runs may have warmed it)."""
    monkeypatch.setattr(warmup, "_WARMED", set())


def _warm_up_thread() -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == "privsyn-warm-up"), None)


def test_warm_up_writes_a_delta_table_in_its_folder_and_removes_it(spark, tmp_path):
    folder = tmp_path / "warm-up"
    with warm_up(spark, str(folder), JOBS):
        thread = _warm_up_thread()
        assert thread is not None
        thread.join()
        assert (folder / "_delta_log").is_dir()  # the output's createOrReplace path ran once
        assert sorted(p.name for p in tmp_path.iterdir()) == ["warm-up"]  # nothing else written
    assert not folder.exists()
    assert _warm_up_thread() is None
    with warm_up(spark, str(folder), JOBS):  # once per session: the next run finds it warm
        assert _warm_up_thread() is None
    assert not folder.exists()


def test_warm_up_errors_only_skip_it(spark, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with warm_up(spark, str(blocker / "warm-up"), JOBS):  # a folder under a file cannot be written
        pass
    assert _warm_up_thread() is None
    assert blocker.read_text() == "not a folder"


def test_without_a_folder_nothing_runs(spark):
    with warm_up(spark, None, JOBS):
        assert _warm_up_thread() is None
    with warm_up(None, "/nonexistent/warm-up", JOBS):
        assert _warm_up_thread() is None
