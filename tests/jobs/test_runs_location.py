"""``runs_dir`` on a cluster: no silent default on the driver's disk.

The default ``./runs`` is refused in one line on a session whose master is not local: before Spark
starts when the CLI is given ``--master``, and on the session spark-submit built otherwise (the API and
the CLI alike, before any job: the standalone master here has no workers). An explicit runs dir is
taken as given.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from privsyn_spark.errors import EXIT_USAGE
from tests.jobs.conftest import REPO, SAMPLE_INPUT, SAMPLE_SCHEMA, StandaloneCluster, base_env, delta_jars, spark_home

REFUSAL = ("runs_dir is required on a cluster (master spark://127.0.0.1:{port}): the driver's ./runs is not "
           "shared storage; pass --runs-dir (runs_dir=...) a location every driver reads")


def test_the_cli_refuses_the_default_runs_dir_on_a_cluster_master_before_spark_starts(tmp_path):
    argv = ["measure", "--input", str(SAMPLE_INPUT), "--schema", str(SAMPLE_SCHEMA), "--no-ledger",
            "--master", "spark://127.0.0.1:7"]  # nothing listens there: the refusal comes first
    done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=base_env(), cwd=tmp_path, timeout=120)
    assert done.returncode == EXIT_USAGE, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("privsyn-spark: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert REFUSAL.format(port=7) in errors[0] and "s3a://" in errors[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.cluster
def test_the_api_and_a_submitted_cli_refuse_the_default_runs_dir_on_a_standalone_master(tmp_path):
    from privsyn_spark.runtime.session import DELTA_CATALOG, DELTA_EXTENSION

    cluster = StandaloneCluster(tmp_path / "cluster")
    try:
        cluster.start(workers=0)
        submit = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url, "--jars", delta_jars(),
                  "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
                  "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}", "--conf", "spark.ui.enabled=false",
                  str(REPO / "tests" / "jobs" / "cluster_runs_dir.py"),
                  str(SAMPLE_SCHEMA), "file:///shared/runs"]
        done = subprocess.run(submit, env=base_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    finally:
        cluster.stop()
    out = done.stdout
    assert done.returncode == 0, (out + done.stderr)[-6000:]
    assert f"master: {cluster.url}" in out
    assert f"api error: {REFUSAL.format(port=cluster.master_port)}" in out
    assert "explicit: file:///shared/runs/r1" in out
    assert "cli exit: 2" in out
    assert f"cli said: privsyn-spark: error: {REFUSAL.format(port=cluster.master_port)}" in out
