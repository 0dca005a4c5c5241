"""A large declared domain on a small table: where measuring's time goes, step by step.

    python bench/bench_large_domain.py [--values 100000] [--rows 2000]

Prints one row per step (seconds). A column's cost should follow its cells, not Python work per value.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--values", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.engine import check_domain_policies, count_marginals, one_and_two_way
    from privsyn_spark.measure.indif_scores import indif_scores
    from privsyn_spark.privacy.noise import SecureDiscreteGaussian
    from privsyn_spark.release.measure_privately import measure_privately
    from privsyn_spark.runtime.session import build_spark_session
    from privsyn_spark.schema.schema import parse_schema

    spark = build_spark_session(master=args.master)
    rng = np.random.default_rng(0)
    names = [f"v{i:06d}" for i in range(args.values)]
    rows = [(names[i], int(a), str(b)) for i, a, b in zip(rng.integers(0, args.values, args.rows),
                                                          rng.integers(0, 50, args.rows), rng.choice(["x", "y"], args.rows))]
    df = spark.createDataFrame(rows, "big string, age int, flag string").cache()
    df.count()
    timings = []

    def step(name, fn):
        start = time.perf_counter()
        out = fn()
        timings.append((name, time.perf_counter() - start))
        return out

    schema = step("parse schema", lambda: parse_schema({"max_column_codes": args.values + 2, "columns": [
        {"name": "big", "type": "categorical", "values": names},
        {"name": "age", "type": "numerical", "dtype": "int", "min": 0, "max": 49, "bins": 10},
        {"name": "flag", "type": "categorical", "values": ["x", "y"]}]}))
    encoded = step("encode (plan)", lambda: encode(df, schema))
    first = step("count 1- and 2-way", lambda: count_marginals(encoded, one_and_two_way(encoded.domain)))
    step("domain policies", lambda: check_domain_policies(encoded, first))
    scores = step("indif", lambda: indif_scores({m: t for m, t in first.tables.items() if len(m) == 2}))
    one_way = {m: t for m, t in first.tables.items() if len(m) == 1}
    step("noise, merging, selection, final pass", lambda: measure_privately(
        one_way, scores, lambda m, r: count_marginals(encoded, m, r).tables, encoded.domain, run_id="b",
        schema_hash="h", epsilon=1.0, delta=1e-9, sampler=SecureDiscreteGaussian()))
    load = os.getloadavg()[0]
    print(f"\n{args.values:,} declared values, {args.rows:,} rows, load average {load:.1f}")
    print(f"{'step':<40}{'seconds':>10}")
    for name, seconds in timings:
        print(f"{name:<40}{seconds:>10.2f}")
    print(f"{'total':<40}{sum(s for _, s in timings):>10.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
