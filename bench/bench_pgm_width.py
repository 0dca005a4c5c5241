"""Benchmark: bounded selection and Private-PGM estimation on wide generated tables (no Spark).

A random Bayesian network (each column copies a function of up to two earlier columns with
probability --dependence, else uniform; sizes 2..60) makes the table in numpy; exact 1- and 2-way
counts come from numpy, the privacy core (``measure_privately``) runs with a seeded TEST-ONLY noise
sampler and the model-size bound, then ``consistent_targets`` estimates the targets. Prints, per
width: selected / rejected pairs, final marginals, junction-tree size, the estimator that ran, its
iterations, seconds and final loss, and the targets' mean TVD to the exact counts on the measured
multi-way cliques (so that a faster estimate that fits worse shows). Asserts nothing.

    .venv/bin/python bench/bench_pgm_width.py [--rows 662000] [--widths 40 97] [--epsilon 1]
        [--model-cells 1e7] [--estimator auto]
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import time
from itertools import combinations
from pathlib import Path

import numpy as np
from bench_pgm import make_count_marginals

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.estimate.targets import consistent_targets
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET
from privsyn_spark.select.selection_config import SelectionConfig


def bayes_net_table(rows: int, d: int, rng: np.random.Generator,
                    dependence: float = 0.7) -> tuple[np.ndarray, Domain, list[tuple[int, int]]]:
    """Codes (rows, d), the domain and the (parent, child) edges of a random Bayesian network."""
    sizes = rng.integers(2, 61, d)
    codes = np.empty((rows, d), dtype=np.int64)
    edges = []
    for j in range(d):
        k = int(rng.integers(0, 3)) if j > 0 else 0
        parents = sorted(rng.choice(j, size=min(k, j), replace=False).tolist()) if j else []
        uniform = rng.integers(0, sizes[j], rows)
        if parents:
            mix = np.zeros(rows, dtype=np.int64)
            for p in parents:
                mix = mix * 31 + codes[:, p] * int(rng.integers(1, 7)) + int(rng.integers(0, 5))
            codes[:, j] = np.where(rng.random(rows) < dependence, mix % sizes[j], uniform)
            edges += [(p, j) for p in parents]
        else:
            codes[:, j] = uniform
    return codes, Domain(tuple(f"x{i}" for i in range(d)), tuple(int(s) for s in sizes)), edges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=662_000)
    parser.add_argument("--widths", type=int, nargs="+", default=[40, 97])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--model-cells", type=float, default=DEFAULT_CELL_BUDGET)
    parser.add_argument("--estimator", choices=["auto", "pgm", "consistency"], default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", help="folder to keep the exact InDif scores in between runs (bench speed only)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    out = []
    for d in args.widths:
        rng = np.random.default_rng(args.seed + d)
        t0 = time.perf_counter()
        codes, domain, _ = bayes_net_table(args.rows, d, rng)
        count = make_count_marginals(codes, domain)
        one_way = count([(a,) for a in domain.attrs], None)
        cache = Path(args.cache) / f"indif_{args.rows}_{d}_{args.seed}.pkl" if args.cache else None
        if cache is not None and cache.exists():
            scores = pickle.loads(cache.read_bytes())
        else:
            scores = indif_scores(count(list(combinations(domain.attrs, 2)), None))
            if cache is not None:
                cache.write_bytes(pickle.dumps(scores))
        t_counts = time.perf_counter() - t0
        t0 = time.perf_counter()
        saved = (Path(args.cache) / f"measurements_{args.rows}_{d}_{args.seed}_{args.epsilon:g}_{args.model_cells:g}"
                 if args.cache else None)
        if saved is not None and Measurements.exists(saved):
            m = Measurements.load(saved)
        else:
            m = measure_privately(one_way, scores, count, domain, run_id="bench-width", schema_hash=f"w{d}",
                                  epsilon=args.epsilon, delta=args.delta, sampler=SeededSamplerForTestsOnly(args.seed),
                                  selection=SelectionConfig(model_cells=args.model_cells))
            if saved is not None:
                m.save(saved)
        t_measure = time.perf_counter() - t0
        t0 = time.perf_counter()
        tree = build_junction_tree(m.domain, [x.attrs for x in m.marginals], cell_budget=None)
        t_tree = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        tables, method, info = consistent_targets(m.marginals, m.domain, m.noisy_total,
                                                  cell_budget=args.model_cells, estimator_choice=args.estimator)
        t_est, cpu_est = time.perf_counter() - t0, time.process_time() - c0
        iters = info.get("iterations")
        tvd = float("nan")
        if m.domain == domain:  # no rare values merged: the exact counts are on the same codes
            multi = [c for c in tables if len(c) > 1]
            exact = count(multi, None)
            tvd = float(np.mean([0.5 * np.abs(tables[c] / tables[c].sum() - exact[c] / exact[c].sum()).sum()
                                 for c in multi]))
        out.append((d, len(m.selected_pairs), len(m.marginals) - d, tree.total_cells, tree.max_clique_cells,
                    t_counts, t_measure, t_tree, method, iters, t_est, cpu_est, info.get("loss"), tvd,
                    os.getloadavg()[0]))
    print(f"\nbounded selection + estimation, {args.rows:,} rows, epsilon={args.epsilon:g}, "
          f"model cells <= {args.model_cells:.3g}, estimator={args.estimator}")
    print("| cols | pairs | marginals | tree cells | largest clique | counts s | select+noise s | tree s "
          "| method | iters | estimate s | estimate CPU s | final loss | TVD to exact | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for d, k, f, total, big, tc, tm, tt, method, iters, te, ce, loss, tvd, load in out:
        print(f"| {d} | {k} | {f} | {total:,} | {big:,} | {tc:.1f} | {tm:.1f} | {tt:.2f} | {method} | "
              f"{iters if iters is not None else '-'} | {te:.1f} | {ce:.1f} | "
              f"{f'{loss:.6g}' if loss is not None else '-'} | {tvd:.4f} | {load:.1f} |")


if __name__ == "__main__":
    main()
