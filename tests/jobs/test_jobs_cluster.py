"""The pipeline on a real Spark standalone cluster (a master and two workers on 127.0.0.1).

The marginal engine on the cluster gives the local session's exact tables with both backends (the JVM
counter's jar travels with ``--jars``).

Measure once locally, synthesize locally and on the cluster with the same run id and seed: the two
Delta tables hold the same rows, even though one worker is killed in the middle of the cluster's
synthesis (its tasks are re-run on the other worker from the reliable checkpoints, and every shard's
randomness depends only on (seed, shard, round))."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from tests.jobs.conftest import (
    REPO,
    SAMPLE_INPUT,
    SAMPLE_SCHEMA,
    StandaloneCluster,
    base_env,
    delta_jars,
    spark_home,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SEED, SHARD_ROWS = 11, 10_000  # ~5 shards over the two workers


def test_cluster_starts_and_stops_by_pid(tmp_path):
    cluster = StandaloneCluster(tmp_path / "cluster")
    try:
        cluster.start(workers=2, cores=1, memory="1g")
        assert cluster.registered_workers() == 2
        assert cluster.master.alive() and all(w.alive() for w in cluster.workers)
    finally:
        cluster.stop()
    assert not cluster.master.alive() and not any(w.alive() for w in cluster.workers)


def _same_rows(spark, left: str, right: str) -> None:
    a, b = spark.read.format("delta").load(left), spark.read.format("delta").load(right)
    assert a.columns == b.columns
    assert a.count() == b.count() > 1000
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


def test_cluster_synthesis_matches_local_and_survives_a_lost_worker(spark, standalone_cluster, tmp_path):
    from privsyn_spark.cli.pipeline import RunConfig, run_measure, run_synthesize
    from privsyn_spark.config import Settings, ShardingConfig, SynthOptions

    delta_jars()  # skips when setup.sh has not resolved the Delta jars
    runs, local_out, cluster_out = tmp_path / "runs", tmp_path / "local", tmp_path / "cluster_out"
    synth = SynthOptions(str(SAMPLE_SCHEMA), 1.0, run_id="cluster-vs-local", runs_dir=str(runs), no_ledger=True,
                         settings=Settings(sharding=ShardingConfig(shard_rows=SHARD_ROWS)))
    config = RunConfig(input=str(SAMPLE_INPUT), output=str(local_out), synth=synth, seed=SEED, evaluate=False)
    run_measure(spark, config)           # the only privacy spend: both syntheses read these measurements
    run_synthesize(spark, config)        # local[2]

    log_path = tmp_path / "cluster_synthesize.log"
    env = base_env(
        SPARK_MASTER=standalone_cluster.url,
        PRIVSYN_SUBMIT_ARGS=" ".join([
            "--conf spark.executor.memory=512m", "--conf spark.executor.cores=1",
            "--conf spark.executor.memoryOverhead=256m", "--conf spark.driver.memory=1g",
            "--conf spark.sql.shuffle.partitions=4", "--conf spark.ui.enabled=false",
            f"--conf spark.checkpoint.dir=file://{tmp_path / 'checkpoints'}"]),
    )
    args = ["--input", str(SAMPLE_INPUT), "--schema", str(SAMPLE_SCHEMA), "--output", str(cluster_out),
            "--run-id", config.run_id, "--runs-dir", str(runs), "--seed", str(SEED),
            "--shard-rows", str(SHARD_ROWS), "--no-ledger", "-v"]  # -v: the INFO lines this test waits for
    with open(log_path, "wb") as log:
        submit = subprocess.Popen([str(REPO / "deploy" / "spark" / "submit.sh"), "synthesize", *args], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
    try:
        text = lambda: log_path.read_text(errors="replace")  # noqa: E731
        wait_for(lambda: "sharded GUM round 0" in text() or submit.poll() is not None, 600,
                 "the cluster synthesis to finish its first round")
        assert submit.poll() is None, f"synthesis ended before the worker could be killed:\n{text()[-5000:]}"
        assert f"session on {standalone_cluster.url}" in text()
        victim = standalone_cluster.workers[0]
        victim.stop()  # kill PID: the worker and its executor go away mid-synthesis
        killed_at = time.monotonic()
        assert not victim.alive()
        code = submit.wait(timeout=900)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait(30)
    log_text = log_path.read_text(errors="replace")
    assert code == 0, log_text[-6000:]
    assert "sharded GUM done" in log_text and "Lost executor" in log_text, log_text[-6000:]
    assert time.monotonic() > killed_at
    _same_rows(spark, str(local_out), str(cluster_out))


def test_cluster_marginal_engine_counts_in_executor_jvms(spark, standalone_cluster, tmp_path):
    """Both engine backends, on executors in other JVMs, give the local session's exact tables."""
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.engine import count_marginals, one_and_two_way
    from privsyn_spark.schema.schema import load_schema

    out = tmp_path / "counts.npz"
    submit = [str(spark_home() / "bin" / "spark-submit"), "--master", standalone_cluster.url,
              "--jars", delta_jars(), "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
              "--conf", "spark.ui.enabled=false", str(REPO / "tests" / "jobs" / "cluster_counts.py"),
              str(SAMPLE_INPUT), str(SAMPLE_SCHEMA), str(out)]
    done = subprocess.run(submit, env=base_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "executors: 2" in done.stdout
    encoded = encode(spark.read.csv(str(SAMPLE_INPUT), header=True, inferSchema=True), load_schema(SAMPLE_SCHEMA))
    local = count_marginals(encoded, one_and_two_way(encoded.domain), backend="arrow").tables
    with np.load(out) as cluster:
        assert len(cluster.files) == 2 * len(local) == 2 * 120
        for m, table in local.items():
            for backend in ("jvm", "arrow"):
                np.testing.assert_array_equal(cluster[f"{backend}:{','.join(m)}"], table, err_msg=f"{backend} {m}")


def test_a_counter_jar_on_the_driver_only_fails_clearly(tmp_path):
    """Executors (separate JVMs: local-cluster) without the jar: a CounterDeploymentError saying so."""
    from privsyn_spark.runtime.counter_jar import packaged_jar

    submit = [str(spark_home() / "bin" / "spark-submit"), "--master", "local-cluster[1,1,1024]",
              "--driver-class-path", str(packaged_jar()),
              "--conf", "spark.task.maxFailures=1", "--conf", "spark.ui.enabled=false",
              str(REPO / "tests" / "jobs" / "cluster_missing_jar.py"), str(SAMPLE_INPUT), str(SAMPLE_SCHEMA)]
    done = subprocess.run(submit, env=base_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "error: privsyn-spark counter: the driver has the counter jar but the executors do not" in done.stdout
