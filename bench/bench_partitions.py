"""Partition benchmark: a table partitioned into days; one day's run against the whole table's,
and a backfill of consecutive days into one partitioned output.

The table: ``--rows`` rows of a generated Bayesian network (``--columns`` columns, sizes 2-60) plus a
``day`` column spread uniformly over ``--days`` days, as a Delta table partitioned by ``day``. Then,
in one process and one Spark session (its start excluded):

1. ``run --partition day=<middle day>`` and the same run on the whole table (no partition): each
   step's seconds from the run report, so the read+encode (the one scan of the input) and the
   counting passes can be compared; the read cost should scale with the partition's share;
2. a backfill of ``--backfill`` days, one run per day (``--partition day=D``, run id
   ``bench.day_D``, a shared ledger budget): total and per-day seconds, the ledger's rows and
   reservations, the output table's versions and the days it holds.

    .venv/bin/python bench/bench_partitions.py --rows 1000000 [--days 100 --backfill 30 --columns 10 --synth-rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import yaml


def _table(spark, rows: int, columns: int, days: int, folder: Path) -> tuple[Path, Path]:
    """The partitioned Delta table and its schema file (reused when already written)."""
    from pyspark.sql import functions as F

    from privsyn_spark.sample.generator import bayes_net_structure, bayes_net_table, generated_schema

    sizes, parents = bayes_net_structure(columns, seed=columns)
    table, schema = folder / f"days_{rows}x{columns}_{days}", folder / f"schema_{columns}.yaml"
    if not (table / "_delta_log").is_dir():
        partitions = max(2, rows // 2_000_000)
        df = bayes_net_table(spark, rows, sizes, parents, seed=columns, partitions=partitions)
        day = F.date_add(F.lit(date(2024, 1, 1)), F.floor(F.rand(99) * days).cast("int"))
        df.withColumn("day", day).repartition("day").write.format("delta").partitionBy("day").save(str(table))
    schema.write_text(yaml.safe_dump(generated_schema(sizes) | {"max_column_codes": 100, "reviewed": True}))
    return table, schema


def _run(argv: list[str], runs: Path, run_id: str) -> tuple[float, dict]:
    from privsyn_spark.cli import main

    start = time.perf_counter()
    code = main(argv)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"run {run_id} exited {code}")
    return wall, json.loads((runs / run_id / "operator" / "report.json").read_text()).get("timings", {})


def bench(rows: int, columns: int, days: int, backfill: int, master: str, workdir: Path, epsilon: float,
          synth_rows: int | None) -> None:
    from privsyn_spark.budget.ledger import dataset_state, read_ledger, set_budget
    from privsyn_spark.runtime.session import build_spark_session
    from privsyn_spark.write.delta_output import latest_version

    spark = build_spark_session(master=master)
    spark.range(1).count()
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    table, schema = _table(spark, rows, columns, days, workdir)
    print(f"table {table} ready in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    runs, ledger = workdir / "runs", workdir / "ledger"
    for stale in (runs, ledger, workdir / "out_one", workdir / "out_full", workdir / "out_backfill"):
        shutil.rmtree(stale, ignore_errors=True)
    common = ["--input", str(table), "--schema", str(schema), "--epsilon", str(epsilon), "--runs-dir", str(runs),
              "--no-evaluate", "--master", master, *(["--rows", str(synth_rows)] if synth_rows else [])]
    middle = (date(2024, 1, 1) + timedelta(days=days // 2)).isoformat()
    start = time.perf_counter()  # warm-up (excluded): the Delta snapshot and the JVM's first scan of the table
    spark.read.format("delta").load(str(table)).where(f"day = '{middle}'").count()
    print(f"warm-up read of one partition: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    full = _run(["run", *common, "--output", str(workdir / "out_full"), "--no-ledger", "--run-id", "full"],
                runs, "full")
    one = _run(["run", *common, "--output", str(workdir / "out_one"), "--no-ledger", "--run-id", "one",
                "--partition", f"day={middle}"], runs, "one")
    steps = [s for s in full[1] if s in one[1]]
    print(f"\n{rows:,} rows x {columns} columns in {days} daily partitions, epsilon {epsilon}, {master}, "
          f"synthetic rows {synth_rows or 'the noisy count'}; load " + " / ".join(f"{v:.1f}" for v in os.getloadavg())
          + "\n", flush=True)
    print("| run | rows read | " + " | ".join(f"{s} (s)" for s in steps) + " | end to end (s) |")
    print("|---" * (len(steps) + 3) + "|")
    for name, share, (wall, timings) in (("one partition", 1 / days, one), ("whole table", 1.0, full)):
        print(f"| {name} | ~{rows * share:,.0f} | " + " | ".join(f"{timings[s]:.1f}" for s in steps)
              + f" | {wall:.1f} |")
    set_budget(spark, str(ledger), "bench", epsilon * (backfill + 1), 1e-9)  # zCDP: rho adds up, eps sub-additive
    per_day = []
    start = time.perf_counter()
    for i in range(backfill):
        day = (date(2024, 1, 1) + timedelta(days=i)).isoformat()
        run_id = f"bench.day_{day}"
        per_day.append(_run(["run", *common, "--output", str(workdir / "out_backfill"), "--ledger", str(ledger),
                             "--dataset-id", "bench", "--run-id", run_id, "--partition", f"day={day}"],
                            runs, run_id)[0])
        print(f"  backfill day {i + 1}/{backfill} ({day}): {per_day[-1]:.1f} s, load "
              + " / ".join(f"{v:.1f}" for v in os.getloadavg()), file=sys.stderr, flush=True)
    total = time.perf_counter() - start
    state = dataset_state(spark, str(ledger), "bench")
    out = str(workdir / "out_backfill")
    held = spark.read.format("delta").load(out).select("day").distinct().count()
    print("\n| backfill | total (s) | per day (s, min / median / max) | ledger rows | reservations | "
          "output versions | days in the output | load (1/5/15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    per_day.sort()
    print(f"| {backfill} days | {total:.1f} | {per_day[0]:.1f} / {per_day[len(per_day) // 2]:.1f} / "
          f"{per_day[-1]:.1f} | {read_ledger(spark, str(ledger)).count()} | {len(state.reservations)} | "
          f"{latest_version(spark, out) + 1} | {held} | " + " / ".join(f"{v:.1f}" for v in os.getloadavg()) + " |")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--backfill", type=int, default=30)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--synth-rows", type=int, help="synthetic rows of every run (default: its noisy count)")
    parser.add_argument("--workdir", default="/tmp/privsyn-partitions")
    args = parser.parse_args()
    bench(args.rows, args.columns, args.days, args.backfill, args.master, Path(args.workdir), args.epsilon,
          args.synth_rows)


if __name__ == "__main__":
    main()
