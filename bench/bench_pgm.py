"""Benchmark Private-PGM estimation and sampling on Adult with PrivSyn's selected marginals.

Encodes the Adult sample in pandas (simple bins for the numeric columns), counts exactly with numpy,
runs the privacy core's selection (``privsyn_spark.release.measure_privately.measure_privately``, bounded by
--model-cells) at the given epsilon with a seeded TEST-ONLY noise sampler, then times: the junction
tree, mirror descent (Private-PGM Algorithm 1) to
convergence (relative loss change below --tol), the consistent targets, PrivSyn's consistency
fallback on the same marginals, and sampling --samples records. Prints a table (wall and CPU seconds:
the CPU figure is the one to compare on a shared machine); asserts nothing.

    .venv/bin/python bench/bench_pgm.py [--epsilon 1] [--delta 1e-9] [--samples 1000000] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.consistency import consistent_marginals
from privsyn_spark.estimate.estimation import mirror_descent
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.estimate.targets import consistent_targets, estimation_budget
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET
from privsyn_spark.select.selection_config import SelectionConfig

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "privsyn_spark" / "sample" / "adult.csv.gz"
NUMERIC_BINS = {  # simple, public bin edges (no data-dependent binning)
    "age": np.arange(15, 100, 5),
    "fnlwgt": np.array([0, 50e3, 100e3, 150e3, 200e3, 250e3, 300e3, 400e3, 600e3, 2e6]),
    "educational-num": np.arange(0.5, 17.5, 1.0),
    "capital-gain": np.array([-1, 0, 2000, 5000, 10000, 20000, 1e6]),
    "capital-loss": np.array([-1, 0, 1000, 1500, 2000, 2500, 1e6]),
    "hours-per-week": np.array([0, 10, 20, 30, 35, 40, 45, 50, 60, 80, 100]),
}


def encode_adult(path: Path) -> tuple[np.ndarray, Domain]:
    """Adult as integer codes (n, d) and its domain: bins for numeric columns, categories otherwise."""
    df = pd.read_csv(path)
    columns, sizes = [], {}
    for name in df.columns:
        if name in NUMERIC_BINS:
            edges = NUMERIC_BINS[name]
            codes = np.clip(np.searchsorted(edges, df[name].to_numpy(), side="left") - 1, 0, len(edges) - 2)
            sizes[name] = len(edges) - 1
        else:
            cat = pd.Categorical(df[name].astype(str).str.strip())
            codes = cat.codes.astype(np.int64)
            sizes[name] = len(cat.categories)
        columns.append(np.asarray(codes, dtype=np.int64))
    return np.stack(columns, axis=1), Domain.from_dict(sizes)


def make_count_marginals(codes: np.ndarray, domain: Domain):
    """The injected marginal engine, numpy edition: exact counts, optionally recoded to merged codes."""
    def count_marginals(marginals: Sequence[tuple[str, ...]],
                        recode: Mapping[str, np.ndarray] | None) -> dict[tuple[str, ...], np.ndarray]:
        out = {}
        for m in marginals:
            cols, shape = [], []
            for a in m:
                c = codes[:, domain.attrs.index(a)]
                if recode is not None:
                    c = recode[a][c]
                    shape.append(int(recode[a].max()) + 1)
                else:
                    shape.append(domain[a])
                cols.append(c)
            flat = np.ravel_multi_index(tuple(cols), shape)
            out[tuple(m)] = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)
        return out
    return count_marginals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--max-iters", type=int, default=2000)
    parser.add_argument("--model-cells", type=float, default=DEFAULT_CELL_BUDGET,
                        help="selection's junction-tree cell budget (0: unbounded, PrivSyn's selection)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")

    t0 = time.perf_counter()
    codes, domain = encode_adult(args.data)
    count = make_count_marginals(codes, domain)
    one_way = count([(a,) for a in domain.attrs], None)
    two_way = count(list(combinations(domain.attrs, 2)), None)
    measurements = measure_privately(
        one_way, indif_scores(two_way), count, domain, run_id="bench-pgm", schema_hash="adult-bench",
        epsilon=args.epsilon, delta=args.delta, sampler=SeededSamplerForTestsOnly(args.seed),
        selection=SelectionConfig(model_cells=args.model_cells or None))
    t_select = time.perf_counter() - t0
    mdomain, marginals, total = measurements.domain, measurements.marginals, measurements.noisy_total

    # the whole selection: what consistent_targets does with it (PGM if the tree fits, else fallback)
    t0 = time.perf_counter()
    tree = build_junction_tree(mdomain, [m.attrs for m in marginals], cell_budget=None)
    t_tree = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, method, tinfo = consistent_targets(marginals, mdomain, total,
                                          cell_budget=estimation_budget(args.model_cells or None))
    t_targets = time.perf_counter() - t0
    if method != "pgm":
        print(f"Private-PGM does not run on this selection: {tinfo['reason']}")
        return
    c0 = time.process_time()
    md = mirror_descent(marginals, mdomain, total, tree=tree, max_iters=args.max_iters, tol=args.tol, log_every=0)
    cpu_md = time.process_time() - c0
    t0 = time.perf_counter()
    _, cinfo = consistent_marginals(marginals, mdomain, total)
    t_consistency = time.perf_counter() - t0

    rng = np.random.default_rng(args.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    records = md.model.sample(args.samples, rng)
    t_sample, cpu_sample = time.perf_counter() - t0, time.process_time() - c0

    # fidelity of the samples on the measured cliques against the real table (context only)
    real_tv = []
    for c in dict.fromkeys(m.attrs for m in marginals):
        exact = count([c], measurements.value_maps)[c] / len(codes)
        synth = np.zeros(mdomain.shape(c))
        np.add.at(synth, tuple(records[:, mdomain.attrs.index(a)] for a in c), 1.0)
        real_tv.append(0.5 * np.abs(exact - synth / len(records)).sum())

    ways = ", ".join(f"{n} x {k}-way" for k, n in sorted(Counter(len(m.attrs) for m in marginals).items()))
    rows = [
        ("dataset", f"Adult {codes.shape[0]:,} rows x {codes.shape[1]} attrs, {mdomain.cells():.3g} cells (merged)"),
        ("selection (epsilon, delta)", f"({args.epsilon:g}, {args.delta:g}): {len(measurements.selected_pairs)} pairs "
                                       f"-> {len(marginals)} marginals ({ways}), {t_select:.2f}s incl. encoding + counts"),
        ("junction tree", f"{tree.total_cells:,} cells in {len(tree.cliques)} cliques (budget "
                          f"{args.model_cells:.0e}), largest {tree.largest_clique} with {tree.max_clique_cells:,} "
                          f"cells; built in {t_tree * 1e3:.1f} ms"),
        ("targets", f"method={method!r} in {t_targets:.2f}s ({tinfo['reason']})"),
        ("consistency fallback", f"{cinfo['iterations']} iterations, {t_consistency:.2f}s, "
                                 f"uniform mix {cinfo['uniform_mix']:.2g}"),
        ("mirror descent (Alg. 1)", f"{md.iterations} iters, {md.info['oracle_calls']} BP calls, "
                                    f"{md.iterations / md.seconds:.2f} iters/s, {md.seconds:.1f}s ({cpu_md:.1f} CPU s) to "
                                    f"{'converge' if md.converged else 'max iters'} (rel. change < {args.tol:g}), "
                                    f"loss {md.loss:.5g}"),
        (f"sample {args.samples:,} records", f"{t_sample:.2f}s ({cpu_sample:.2f} CPU s), {args.samples / t_sample / 1e6:.2f} M records/s"),
        ("samples vs real, measured cliques", f"mean TV {np.mean(real_tv):.4f}, max TV {np.max(real_tv):.4f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\n{'Private-PGM on Adult':<{width}}  ")
    print("-" * (width + 2 + max(len(v) for _, v in rows)))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
