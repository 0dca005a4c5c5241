"""Benchmark: the evaluation's value metrics (KS distance, spike shares, histograms of each numeric column).

The bundled sample's numeric columns (a random half as the real table, the other as the synthetic one:
the same shape of work as a run's evaluation), then generated tables of ``--rows`` rows and 2 to
``--width`` uniform numeric columns: per table, the numeric columns, the Spark jobs and the seconds of each
repeat (the first pays Spark's warm-up). The jobs do not grow with the columns: every column is counted
once per distinct value and each metric is one job over those counts. Asserts nothing.

    .venv/bin/python bench/bench_value_metrics.py [--rows 100000] [--width 24] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from privsyn_spark.api import SAMPLE_DATA, SAMPLE_SCHEMA
from privsyn_spark.evaluate.value_metrics import value_metrics
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.schema import Schema, load_schema, parse_schema


def _timed(spark, name: str, real, synthetic, schema: Schema, rows: int, repeat: int) -> None:
    columns = sum(isinstance(c, NumericalColumn) for c in schema.columns)
    for run in range(repeat):
        group = f"bench-value-metrics-{name}-{run}"
        spark.sparkContext.setJobGroup(group, group)
        start = time.perf_counter()
        value_metrics(real, synthetic, schema)
        seconds = time.perf_counter() - start
        jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
        print(f"| {name} | {rows:,} | {columns} | {run} | {jobs} | {seconds:.2f} | {os.getloadavg()[0]:.1f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each generated table")
    parser.add_argument("--width", type=int, default=24, help="most numeric columns of a generated table")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = build_spark_session(master="local[2]", app_name="bench-value-metrics")
    print("| table | rows (real) | numeric columns | repeat | Spark jobs | seconds | load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    schema = load_schema(SAMPLE_SCHEMA)
    numeric = [c.name for c in schema.columns if isinstance(c, NumericalColumn)]
    real, synthetic = (part.cache() for part in read_table(spark, SAMPLE_DATA, "csv").select(*numeric)
                       .randomSplit([0.5, 0.5], seed=0))
    synthetic.count()
    _timed(spark, "the sample", real, synthetic, schema, real.count(), args.repeat)
    for width in sorted({2, args.width}):
        doc = {"columns": [{"name": f"n{i}", "type": "numerical", "dtype": "double", "min": 0, "max": 1,
                            "bins": 16} for i in range(width)]}
        frames = []
        for seed in (0, 1):
            values = np.random.default_rng(seed).random((args.rows, width)).round(4)
            frames.append(spark.createDataFrame([tuple(map(float, row)) for row in values],
                                                ", ".join(f"n{i} double" for i in range(width))).cache())
            frames[-1].count()
        _timed(spark, f"uniform x {width}", *frames, parse_schema(doc), args.rows, args.repeat)
    spark.stop()


if __name__ == "__main__":
    main()
