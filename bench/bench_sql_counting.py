"""Pure Spark SQL counting vs the JVM counter jar (is a jar-free path within 1.5x?).

All 1-way + 2-way marginals of Adult (replicated ``--copies`` times): (a) the engine's JVM backend;
(b) one Spark SQL pass that explodes every row into its cell of each computed table (offset +
mixed-radix index) and groups by cell. Checks both give the same tables; prints the times.

    .venv/bin/python bench/bench_sql_counting.py [--copies 4] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from privsyn_spark.evaluate.codes import unpacked_codes
from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import _plan, count_marginals, one_and_two_way
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.schema import load_schema


def sql_counts(codes, domain, tables):
    """The computed tables by one SQL pass: explode(cell of each table), groupBy(cell).count()."""
    from pyspark.sql import functions as F

    cells, offsets, offset = [], [], 0
    for m in tables:
        index = F.lit(0)
        for a in m:
            index = index * domain[a] + F.col(f"`{a}`")
        cells.append(index + offset)
        offsets.append(offset)
        offset += domain.cells(m)
    flat = np.zeros(offset, dtype=np.int64)
    rows = codes.select(F.explode(F.array(*cells)).alias("cell")).groupBy("cell").count().collect()
    for r in rows:  # at most `offset` cells: counts, not input rows
        flat[r["cell"]] = r["count"]
    return {m: flat[o:o + domain.cells(m)].reshape(domain.shape(m)) for m, o in zip(tables, offsets)}


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = build_spark_session(master=args.master, delta=False)
    schema = load_schema("privsyn_spark/sample/adult.schema.yaml")
    raw = read_table(spark, "privsyn_spark/sample/adult.csv.gz", "csv")
    for _ in range(args.copies - 1):
        raw = raw.unionByName(raw)  # doubles each time
    encoded = encode(raw, schema)
    encoded.df.cache().count()
    domain = encoded.domain
    _, computed, _ = _plan(domain, one_and_two_way(domain))
    codes = unpacked_codes(encoded)
    runs = {"jvm": [], "sql": []}
    for _ in range(2):
        seconds, jvm = timed(lambda: count_marginals(encoded, computed, backend="jvm").tables)
        runs["jvm"].append(seconds)
        seconds, sql = timed(lambda: sql_counts(codes, domain, computed))
        runs["sql"].append(seconds)
    assert all(np.array_equal(jvm[m], sql[m]) for m in computed)
    rows = encoded.df.count()
    print(f"load average {os.getloadavg()[0]:.1f}; {rows:,} rows, {len(computed)} computed tables")
    print("| path | best of 2 (s) |")
    print("|---|---|")
    for name, times in runs.items():
        print(f"| {name} | {min(times):.2f} |")
    print(f"sql / jvm = {min(runs['sql']) / min(runs['jvm']):.1f}x")


if __name__ == "__main__":
    main()
