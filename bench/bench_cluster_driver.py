"""What reaches the driver, and what crosses the shuffle, on a standalone cluster as the rows grow.

Starts a Spark standalone master and two 1-core workers on 127.0.0.1 (the helpers of the cluster
tests, ``tests/jobs/conftest.py``), then for each row count spark-submits this script in ``--child``
mode: it generates a Bayesian-network table (15 columns, sizes 2-60, the same partitions at every
length), runs measure + synthesize + write (``run_measure``, ``run_synthesize``; epsilon 1, no
evaluation) and sums Spark's stage metrics over the pipeline's stages from the driver's REST API (the
UI is enabled on a free loopback port for this bench only): ``resultSize`` (task results sent to the
driver: count arrays, per-shard statistics, commit info), ``shuffleWriteBytes`` and ``outputBytes``
(the persisted codes and the synthetic table; reliable checkpoints are not counted there). The rows
generated are public (the generator's); the pipeline reads no exact count.

    nice -n 19 .venv/bin/python bench/bench_cluster_driver.py --rows 200000,2000000 [--workdir W]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS, PARTITIONS, SEED = 15, 4, 7
METRICS = ("resultSize", "shuffleWriteBytes", "shuffleReadBytes", "outputBytes")


def _stages(ui: str, app: str) -> list[dict]:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages", timeout=60) as r:
        stages: list[dict] = json.loads(r.read())
    return stages


def _result_of(stages: list[dict], name: str) -> int:
    """Bytes the stages whose call site names ``name`` sent to the driver."""
    return sum(int(s.get("resultSize", 0)) for s in stages if name in s["name"])


def child(rows: int, workdir: Path, ui_port: int, out: Path) -> None:
    """One length: generate, run the pipeline, write the summed stage metrics of its stages to ``out``."""
    import yaml

    from privsyn_spark.cli.pipeline import RunConfig, run_measure, run_synthesize
    from privsyn_spark.config import SynthOptions
    from privsyn_spark.runtime.session import build_spark_session
    from privsyn_spark.sample.generator import bayes_net_structure, bayes_net_table, generated_schema

    spark = build_spark_session()
    sizes, parents = bayes_net_structure(COLUMNS, seed=COLUMNS)
    table, schema = workdir / f"table_{rows}", workdir / f"schema_{rows}.yaml"
    bayes_net_table(spark, rows, sizes, parents, seed=SEED, partitions=PARTITIONS).write.mode("overwrite").parquet(
        str(table))
    schema.write_text(yaml.safe_dump(generated_schema(sizes) | {"max_column_codes": 100, "reviewed": True}))
    ui, app = f"http://127.0.0.1:{ui_port}", spark.sparkContext.applicationId
    before = max((s["stageId"] for s in _stages(ui, app)), default=-1)
    run_id = f"cluster-{rows}"
    synth = SynthOptions(str(schema), 1.0, run_id=run_id, runs_dir=str(workdir / "runs"), no_ledger=True)
    config = RunConfig(input=str(table), input_format="parquet", output=str(workdir / f"out_{rows}"), synth=synth,
                       seed=SEED, evaluate=False)
    start = time.perf_counter()
    run_measure(spark, config)
    run_synthesize(spark, config)
    wall = time.perf_counter() - start
    time.sleep(2)  # the listener bus posts the last stage's metrics asynchronously
    stages = [s for s in _stages(ui, app) if s["stageId"] > before]
    result = {"rows": rows, "wall": wall, "stages": len(stages),
              "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1,
              **{m: sum(int(s.get(m, 0)) for s in stages) for m in METRICS},
              "counting_result": _result_of(stages, "MarginalCounter"), "gum_sums": _result_of(stages, "treeAggregate"),
              "gum_rounds": sum("treeAggregate" in s["name"] for s in stages)}
    out.write_text(json.dumps(result))
    spark.stop()


def _submit(cluster_url: str, rows: int, workdir: Path) -> dict:
    from tests.jobs.conftest import base_env, delta_jars, free_port, spark_home

    out, port = workdir / f"metrics_{rows}.json", free_port()
    conf = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "true", "spark.ui.port": str(port),
            "spark.ui.retainedStages": "100000", "spark.checkpoint.dir": f"file://{workdir / 'checkpoints'}",
            "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods",
            "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods"}
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster_url, "--jars", delta_jars(),
           *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
           str(Path(__file__).resolve()), "--child", str(rows), "--workdir", str(workdir), "--ui-port", str(port),
           "--out", str(out)]
    env = base_env(PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the child run of {rows:,} rows exited {done.returncode}:\n{done.stderr[-4000:]}")
    result: dict = json.loads(out.read_text())
    targets = json.loads((workdir / "runs" / f"cluster-{rows}" / "targets" / "targets.json").read_text())
    return result | {"targets": len(targets["keys"]), "model_cells": targets["info"].get("model_cells", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="200000,2000000", help="comma-separated row counts")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ui-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.workdir, args.ui_port, args.out)
        return
    sys.path.insert(0, str(ROOT))
    from tests.jobs.conftest import StandaloneCluster

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="privsyn-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(workdir / "cluster")
    results = []
    try:
        cluster.start(workers=2, cores=1, memory="1500m")
        for rows in (int(r) for r in args.rows.split(",")):
            shutil.rmtree(workdir / "runs" / f"cluster-{rows}", ignore_errors=True)
            results.append(_submit(cluster.url, rows, workdir))
            print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        cluster.stop()
    print(f"load average at the end: {os.getloadavg()}")
    print("| rows | executors | targets | model cells | to the driver | of it: counting passes | of it: GUM count "
          "sums (rounds) | shuffle write | output written | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['rows']:,} | {r['executors']} | {r['targets']} | {r['model_cells']:,} | {r['resultSize']:,} | "
              f"{r['counting_result']:,} | {r['gum_sums']:,} ({r['gum_rounds']}) | {r['shuffleWriteBytes']:,} | "
              f"{r['outputBytes']:,} | {r['wall']:.1f} |")

if __name__ == "__main__":
    main()
