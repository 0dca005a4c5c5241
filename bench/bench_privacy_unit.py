"""A person as the privacy unit: what contribution bounding costs in time and in fidelity.

A generated table of many rows per person (``privsyn_spark.sample.generator.people_table``: person
attributes constant per id, per-row attributes depending on them and on how active the person is,
heavy-tailed rows per id), written once as Parquet. Then, on that file:

- time of the run's scratch job with bounding at each K (``measure/input_codes.bounded_codes``: read,
  encode, pack, bound; the shuffle moves the id and the packed words) against three references timed
  right next to it (the ratios hold under a moving load): a bare scan (every column hashed and summed),
  a plain ``groupBy(person_id).count()`` (the floor: one shuffle, but of one partial count per
  id and partition) and read+encode+pack plus one plain shuffle of its rows by id (``repartition``: the
  rows bounding has to move, moved with no ranking at all); the jobs write to Spark's ``noop`` sink, so
  they only read and compute;
- for K = 1, 5, 20, 50: a person-level run at ``--epsilon`` (PrivSyn, GUM), the rows and ids bounding
  dropped, the mean 1-/2-way TVD of the synthetic table against the bounded real table and against
  the full real table;
- the group-privacy alternative a user would otherwise run: a row-level run at epsilon / M, where
  M is the largest number of rows of one person (group privacy for M rows).

Synthetic tables have ``--synth-rows`` rows (TVD compares distributions; the pipeline's default is the
noisy total of bounded rows). Only this bench reads exact counts of the (generated, public) input.

    .venv/bin/python bench/bench_privacy_unit.py --people 1000000 --mean-rows 20 [--ks 1,5,20,50]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _tables(df, schema):
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.engine import count_marginals, one_and_two_way

    return count_marginals(encode(df, schema), one_and_two_way(schema.domain())).tables


def _against(seconds: float, references: tuple[float, float, float]) -> str:
    """``seconds`` as multiples of the bare scan, the groupBy(id).count() and the shuffle by id."""
    return ", ".join(f"{seconds / ref:.2f}x {name} ({ref:.1f} s)"
                     for name, ref in zip(("scan", "groupBy", "shuffle"), references, strict=True))


def _tvd(real, synthetic, ways: int) -> float:
    from privsyn_spark.evaluate.fidelity import tvd

    return float(np.mean([tvd(real[m], synthetic[m]) for m in real if len(m) == ways]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=50_000)
    parser.add_argument("--mean-rows", type=float, default=20.0)
    parser.add_argument("--ks", default="1,5,20,50")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--synth-rows", type=int, default=200_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default="/tmp/privsyn-unit-bench")
    parser.add_argument("--repeats", type=int, default=2, help="timing repeats (the best is reported)")
    parser.add_argument("--timing-only", action="store_true", help="time the jobs, skip the synthesis runs")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from privsyn_spark import PrivSyn
    from privsyn_spark.errors import BadInputData
    from privsyn_spark.measure.bounding import bound_contributions
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.input_codes import bounded_codes, with_rule_codes
    from privsyn_spark.measure.packing import pack_codes
    from privsyn_spark.privacy.unit import PrivacyUnit
    from privsyn_spark.runtime.session import build_spark_session
    from privsyn_spark.sample.generator import people_schema, people_table
    from privsyn_spark.schema.schema import parse_schema

    print(f"uptime at the start: {_uptime()}", flush=True)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark_session(master=args.master, app_name="bench-privacy-unit",
                                conf={"spark.sql.shuffle.partitions": "8"})
    table = work / f"people-{args.people}-{args.mean_rows:g}.parquet"
    if not table.exists():
        people_table(spark, args.people, args.mean_rows, seed=1).write.parquet(str(table))
    df = spark.read.parquet(str(table))
    schema = parse_schema(people_schema())
    per_id = df.groupBy("person_id").count()
    stats = per_id.agg(F.count("*").alias("ids"), F.sum("count").alias("rows"), F.max("count").alias("max")).first()
    rows, people, most = int(stats["rows"]), int(stats["ids"]), int(stats["max"])
    print(f"table: {rows:,} rows of {people:,} people (max {most:,} rows per person, mean {rows / people:.1f}); "
          f"load {os.getloadavg()[0]:.1f}")

    cols = df.columns
    noop = {"format": "noop", "mode": "overwrite"}

    def best(fn) -> float:
        return min(_timed(fn) for _ in range(args.repeats))

    def scan_job() -> None:
        df.agg(F.sum(F.xxhash64(*cols) % 1024)).collect()

    def count_job() -> None:
        per_id.write.save(**noop)

    ids = ("person_id",)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))

    def shuffle_job() -> None:
        pack_codes(with_rule_codes(encode(df, schema, ids)), ids).df.repartition(partitions, *ids).write.save(**noop)

    def references() -> tuple[float, float, float]:  # timed next to each bounding: a moving load
        return best(scan_job), best(count_job), best(shuffle_job)

    full = _tables(df, schema)
    ks = [int(k) for k in args.ks.split(",")]
    results = []
    for k in ks:
        unit = PrivacyUnit(("person_id",), k)
        unit_schema = dataclasses.replace(schema, privacy_unit=unit)
        bounding = best(lambda s=unit_schema: bounded_codes(df, s)[0].df.write.save(**noop))
        near = references()
        print(f"  K={k}: read+encode+pack+bound {bounding:.1f} s: {_against(bounding, near)} ({_uptime()})",
              flush=True)
        if args.timing_only:
            continue
        bounded = bound_contributions(df, unit, seed=7)
        bounded.df.write.save(**noop)  # a Dataset action: the bounding's tallies are observed
        info = bounded.stats()
        bounded_tables = _tables(bounded.df, schema)
        runs = work / f"runs-{k}"
        shutil.rmtree(runs, ignore_errors=True)
        start = time.perf_counter()
        synth = PrivSyn(schema, args.epsilon, no_ledger=True, runs_dir=str(runs), run_id=f"k{k}",
                        privacy_id="person_id", max_rows_per_id=k)
        model = synth.fit(df)
        out = model.sample(args.synth_rows, seed=0, spark=spark)
        synthetic = _tables(out, schema)
        seconds = time.perf_counter() - start
        results.append((f"person, K={k}", args.epsilon, info["rows_dropped_share"], info["ids_truncated_share"],
                        f"{bounding:.1f} ({_against(bounding, near)})", _tvd(bounded_tables, synthetic, 1),
                        _tvd(bounded_tables, synthetic, 2), _tvd(full, synthetic, 1), _tvd(full, synthetic, 2), seconds))
        print(f"  K={k}: done in {seconds:.0f} s ({_uptime()}): {results[-1]}", flush=True)
    if args.timing_only:
        spark.stop()
        return
    # group privacy: a row-level run at epsilon / M protects a person of M rows
    eps_group = args.epsilon / most
    runs = work / "runs-group"
    shutil.rmtree(runs, ignore_errors=True)
    start = time.perf_counter()
    try:
        model = PrivSyn(schema, eps_group, no_ledger=True, runs_dir=str(runs), run_id="group").fit(df)
        synthetic = _tables(model.sample(args.synth_rows, seed=0, spark=spark), schema)
        g1, g2 = _tvd(full, synthetic, 1), _tvd(full, synthetic, 2)
    except BadInputData as err:  # the noisy total cannot be told from 0 at this epsilon
        print(f"  group privacy run refused: {err}")
        g1 = g2 = float("nan")
    results.append((f"rows, eps/M (M={most:,})", eps_group, 0.0, 0.0, "-", float("nan"), float("nan"),
                    g1, g2, time.perf_counter() - start))
    print(f"  group privacy: {results[-1]}", flush=True)

    print()
    print("| run | epsilon | rows dropped | ids truncated | read+encode+pack+bound s (x the references next to it) "
          "| 1-way TVD vs bounded | 2-way TVD vs bounded | 1-way TVD vs full | 2-way TVD vs full | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, eps, dropped, trunc, timing, b1, b2, f1, f2, run_s in results:
        print(f"| {name} | {eps:.3g} | {dropped:.1%} | {trunc:.1%} | {timing} | {b1:.4f} | {b2:.4f} | {f1:.4f} "
              f"| {f2:.4f} | {run_s:.0f} |")
    print(f"\n{rows:,} rows, {people:,} people; uptime at the end: {_uptime()}")
    spark.stop()


if __name__ == "__main__":
    main()
