"""Benchmark: the estimate step alone on saved measurements (a run's ``runs/<id>/measurements``).

Post-processing only: loads the measurements artifact and runs the pipeline's estimate stage
(``estimate_targets`` with the run's schema: the values its policies rule out held at no mass; default
model size), ``--repeat`` times, then the model's marginals of the pairs inside no target (the pipeline's
GUM targets, ``PAIR_TARGET_WORK``). Prints the estimator, junction-tree size, iterations, oracle calls,
wall and CPU seconds, the final loss, the pair targets and their seconds, and the load average. Asserts
nothing.
Run it with two checkouts on the same folder to compare code at the same measurements.

    .venv/bin/python bench/bench_estimate_saved.py runs/<run id>/measurements [--schema S] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import time

from privsyn_spark.estimate.targets import PAIR_TARGET_WORK, estimate_targets, unmeasured_pair_targets
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.schema.schema import load_schema
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measurements", help="a measurements folder (runs/<run id>/measurements)")
    parser.add_argument("--model-cells", type=float, default=DEFAULT_CELL_BUDGET)
    parser.add_argument("--schema", default="privsyn_spark/sample/adult.schema.yaml", help="the run's schema")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    m = Measurements.load(args.measurements)
    schema = load_schema(args.schema)
    print(f"\nestimation on {args.measurements}: {len(m.domain)} attributes, {len(m.marginals)} measurements")
    print("| run | method | tree cells | iterations | oracle calls | estimate s (wall) | estimate CPU s | final loss "
          "| pair targets | pair targets s | load |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        targets, description, model = estimate_targets(m, schema, model_cells=args.model_cells)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        pairs = {} if model is None else unmeasured_pair_targets(model, targets, PAIR_TARGET_WORK)
        pair_seconds = time.perf_counter() - t1
        method, info = description["method"], description["info"]
        loss = info.get("loss")
        print(f"| {run} | {method} | {info.get('model_cells', 0):,} | {info.get('iterations', '-')} | "
              f"{info.get('oracle_calls', '-')} | {wall:.1f} | {cpu:.1f} | "
              f"{f'{loss:.6g}' if loss is not None else '-'} | {len(pairs)} | {pair_seconds:.2f} | "
              f"{os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
