"""Benchmark the marginal engine on a generated 10M x 15 table.

(a) a Spark scan touching all 15 columns, (b) all 1-way + 2-way marginals (15 + 105 tables)
through the engine's JVM backend, (b') the same through its Arrow (Python worker) backend, checked
equal, (c) the same tables in plain numpy in one process (the floor).
Prints rows/s, the ratios, and peak memory of the driver, the JVM and the Arrow backend's worker.

    .venv/bin/python bench/bench_marginals.py [--rows 10000000] [--master local[2]]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.sample.generator import generated_schema, generated_table
from privsyn_spark.schema.schema import parse_schema

SIZES = [2, 5, 8, 10, 16, 3, 7, 12, 20, 4, 9, 6, 15, 11, 30]


def best_of(runs: int, fn):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def numpy_floor(path: Path) -> tuple[float, float]:
    """Load the Parquet files into numpy, then time all 1-/2-way tables on one thread."""
    load_start = time.perf_counter()
    table = pq.read_table(path)
    codes = [table.column(f"x{j}").to_numpy().astype(np.int64) for j in range(len(SIZES))]
    load = time.perf_counter() - load_start
    start = time.perf_counter()
    chunk = 1 << 16
    for lo in range(0, len(codes[0]), chunk):
        part = [c[lo:lo + chunk] for c in codes]
        for i in range(len(SIZES)):
            for j in range(i + 1, len(SIZES)):
                np.bincount(part[i] * SIZES[j] + part[j], minlength=SIZES[i] * SIZES[j])
    return time.perf_counter() - start, load


def jvm_peak_mb(spark) -> float:
    """Peak resident memory of the driver JVM (local mode: driver and executors share it)."""
    pid = spark.sparkContext._gateway.proc.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    spark = build_spark_session(master=args.master, delta=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table"
        generated_table(spark, args.rows, SIZES, dependent=[1, 3, 5, 8, 12], seed=7,
                        partitions=8).write.parquet(str(path))
        df = spark.read.parquet(str(path))
        from pyspark.sql import functions as F

        scan, _ = best_of(args.runs, lambda: df.select(*[F.sum(c) for c in df.columns]).collect())
        encoded = encode(df, parse_schema(generated_schema(SIZES) | {"max_column_codes": 100}))
        wanted = one_and_two_way(encoded.domain)
        engine, counts = best_of(args.runs, lambda: count_marginals(encoded, wanted, backend="jvm"))
        arrow, arrow_counts = best_of(args.runs, lambda: count_marginals(encoded, wanted, backend="arrow"))
        assert counts.rows == arrow_counts.rows == args.rows
        assert all(np.array_equal(counts.tables[m], arrow_counts.tables[m]) for m in wanted)
        cores = spark.sparkContext.defaultParallelism
        driver_py_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the numpy floor
        jvm_mb = jvm_peak_mb(spark)
        floor, load = numpy_floor(path)

    rows = args.rows
    print(f"\nMarginal engine, {rows:,} rows x {len(SIZES)} columns, {len(wanted)} tables, "
          f"master {args.master} ({cores} cores), best of {args.runs}\n")
    print("| step | wall (s) | rows/s | rows/s per core |")
    print("|---|---|---|---|")
    print(f"| (a) Spark scan, all 15 columns | {scan:.2f} | {rows / scan:,.0f} | {rows / scan / cores:,.0f} |")
    print(f"| (b) engine (jvm backend), all 1-/2-way tables | {engine:.2f} | {rows / engine:,.0f} | "
          f"{rows / engine / cores:,.0f} |")
    print(f"| (b') engine (arrow backend), same tables | {arrow:.2f} | {rows / arrow:,.0f} | "
          f"{rows / arrow / cores:,.0f} |")
    print(f"| (c) numpy, one thread (after {load:.1f} s load) | {floor:.2f} | {rows / floor:,.0f} | {rows / floor:,.0f} |")
    print(f"\n(b)/(a) = {engine / scan:.2f}  (target <= 3); (b')/(a) = {arrow / scan:.2f}")
    print(f"(b) per core vs (c): {(engine * cores) / floor:.2f}x slower per core  (target <= 3)")
    print(f"peak memory: driver Python {driver_py_mb:,.0f} MB, driver+executor JVM {jvm_mb:,.0f} MB, "
          f"arrow backend's executor Python worker {arrow_counts.worker_peak_rss_mb:,.0f} MB "
          f"(the jvm backend counts inside the executor JVM)")


if __name__ == "__main__":
    main()
