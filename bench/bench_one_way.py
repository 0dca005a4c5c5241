"""Offline design experiment for 1-way fidelity: the driver-side estimate from noisy measurements.

No Spark, no GUM: Adult is encoded in pandas (``bench_pgm.encode_adult``), or ``--folder`` reads a table folder
of ``bench/bench_compare.py`` (``train.csv`` codes + ``domain.json``; every column gets the empty ``other`` code
the bench's schema gives it), counted with numpy, measured by the privacy core (``measure_privately``, seeded
TEST-ONLY noise, the same seeds for every split: paired) under each candidate budget split, and the consistent
targets are fitted (``consistent_targets``, Private-PGM). Prints, per split and epsilon, the mean over seeds of
the TVD between the fitted model and the real table: 1-way on the original domain (merged values expanded by
the noisy 1-way counts, as decoding does; also the raw noisy 1-way counts themselves, ``noisy 1-way``), 2-way
over all pairs, 2-way over a generated table's (parent, child) pairs (``2-way dep.``, ``bench_compare.dependent_pairs``
of the folder's name) and 3-way over 100 fixed random triples (all on the merged domain, from the model). A split
is ``one_way,indif,selected[,allocation]`` (``BudgetSplit.one_way_allocation``: weighted or uniform); ``--tols``
compares mirror descent's stopping tolerances on the same measurements; ``--raw-indif`` selects on the released
InDif scores as they are (``selection.shrink_indif`` false). Asserts nothing.

    .venv/bin/python bench/bench_one_way.py --epsilons 0.5 1 4 --seeds 3 --splits 0.1,0.1,0.8 0.3,0.1,0.6
    .venv/bin/python bench/bench_one_way.py --folder W/generated --epsilons 1 --seeds 5 \
        --splits 0.35,0.05,0.6,uniform 0.35,0.05,0.6,weighted
    .venv/bin/python bench/bench_one_way.py --folder W/binary --epsilons 0.5 1 --seeds 4 --splits 0.5,0.05,0.45 \
        --raw-indif
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_compare import dependent_pairs
from bench_pgm import DEFAULT_DATA, encode_adult, make_count_marginals

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.estimation import MirrorDescent
from privsyn_spark.estimate.merged_shares import shrink_groups
from privsyn_spark.estimate.targets import consistent_targets
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.select.selection_config import SelectionConfig


def _tvd(p: np.ndarray, q: np.ndarray) -> float:
    p = np.maximum(p, 0.0).ravel()
    q = np.maximum(q, 0.0).ravel()
    return 0.5 * float(np.abs(p / max(p.sum(), 1e-300) - q / max(q.sum(), 1e-300)).sum())


def one_run(codes, domain, epsilon: float, split: BudgetSplit, seed: int, triples, tol: float = 1e-4,
            dependent: Sequence[tuple[str, str]] = (), selection: SelectionConfig = SelectionConfig()) -> dict[str, float]:
    """Measure, fit (mirror descent to the relative tolerance ``tol``), and score the model against the real counts
    (``dependent``: the generator's (parent, child) pairs, scored apart as ``2-way dep.``)."""
    count = make_count_marginals(codes, domain)
    one_way = count([(a,) for a in domain.attrs], None)
    two_way = count(list(itertools.combinations(domain.attrs, 2)), None)
    m = measure_privately(one_way, indif_scores(two_way), count, domain, run_id="one-way", schema_hash="adult",
                          epsilon=epsilon, delta=1e-9, split=split, sampler=SeededSamplerForTestsOnly(seed),
                          selection=selection)
    mdomain = m.domain
    t0 = time.perf_counter()
    _, method, info = consistent_targets(m.marginals, mdomain, m.noisy_total, estimator_choice="pgm",
                                        estimator=MirrorDescent(tol=tol))
    seconds = time.perf_counter() - t0
    model = info["model"]
    sigmas = m.one_way_sigmas()
    tv1: dict[str, list[float]] = {"1-way": [], "1-way uniform": [], "1-way shrunk": [], "noisy 1-way": []}
    for a in domain.attrs:
        tv1["noisy 1-way"].append(_tvd(one_way[(a,)], m.one_way_original[a].astype(float)))
        merged = model.marginal((a,))
        vmap = m.value_maps[a]
        raw = m.one_way_original[a].astype(float)
        sizes = np.bincount(vmap, minlength=mdomain[a])
        for key, weights in (("1-way", raw), ("1-way uniform", np.ones_like(raw)),
                             ("1-way shrunk", shrink_groups(raw, vmap, sigmas[a]))):
            weights = np.maximum(weights, 0.0)
            group = np.bincount(vmap, weights=weights, minlength=mdomain[a])
            share = np.where(group[vmap] > 0, weights / np.where(group[vmap] > 0, group[vmap], 1.0),
                             1.0 / sizes[vmap])
            tv1[key].append(_tvd(one_way[(a,)], merged[vmap] * share))
    pairs = list(itertools.combinations(mdomain.attrs, 2))
    exact2 = count(pairs, m.value_maps)
    tv2 = {p: _tvd(exact2[p], model.marginal(p)) for p in pairs}
    dep = [tv2[p] for p in dependent] or [float("nan")]
    exact3 = count(triples, m.value_maps)
    tv3 = [_tvd(exact3[t], model.marginal(t)) for t in triples]
    return {**{k: float(np.mean(v)) for k, v in tv1.items()}, "2-way": float(np.mean(list(tv2.values()))),
            "2-way dep.": float(np.mean(dep)), "3-way": float(np.mean(tv3)),
            "marginals": len(m.marginals), "seconds": seconds, "iterations": info["iterations"]}


def read_folder(folder: Path) -> tuple[np.ndarray, Domain]:
    """A bench_compare table folder's training codes and domain, plus the empty ``other`` code per column."""
    sizes = json.loads((folder / "domain.json").read_text())
    codes = pd.read_csv(folder / "train.csv")[list(sizes)].to_numpy(dtype=np.int64)
    return codes, Domain.from_dict({a: int(s) + 1 for a, s in sizes.items()})


def parse_split(text: str) -> BudgetSplit:
    """``one_way,indif,selected[,allocation]`` as a BudgetSplit."""
    parts = text.split(",")
    extra = {"one_way_allocation": parts[3]} if len(parts) > 3 else {}
    return BudgetSplit(*(float(x) for x in parts[:3]), **extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--splits", nargs="+", default=["0.1,0.1,0.8", "0.2,0.1,0.7", "0.3,0.1,0.6"],
                        help="one_way,indif,selected fractions[,weighted|uniform]")
    parser.add_argument("--tols", type=float, nargs="+", default=[1e-4],
                        help="mirror descent's relative stopping tolerances to compare (same measurements)")
    parser.add_argument("--folder", type=Path, default=None, help="a bench_compare table folder (default: Adult)")
    parser.add_argument("--raw-indif", action="store_true",
                        help="DenseMarg reads the released InDif scores as they are (selection.shrink_indif false)")
    args = parser.parse_args(argv)
    codes, domain = encode_adult(DEFAULT_DATA) if args.folder is None else read_folder(args.folder)
    names = list(domain.attrs)
    selection = SelectionConfig(shrink_indif=not args.raw_indif)
    dependent = [] if args.folder is None else [(names[a], names[b]) for a, b in dependent_pairs(args.folder.name)]
    rng = np.random.default_rng(0)
    all_triples = list(itertools.combinations(domain.attrs, 3))
    triples = [all_triples[i] for i in rng.choice(len(all_triples), 100, replace=False)]
    print("| split (1-way, InDif, selected) | tol | epsilon | 1-way TVD | 1-way, uniform expansion | 1-way, shrunk expansion "
          "| noisy 1-way | 2-way TVD | 2-way dep. | 3-way TVD | marginals | iterations | fit s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for text, tol in itertools.product(args.splits, args.tols):
        split = parse_split(text)
        for eps in args.epsilons:
            runs = [one_run(codes, domain, eps, split, seed, triples, tol, dependent, selection)
                    for seed in range(args.seeds)]
            cell = {k: np.mean([r[k] for r in runs]) for k in runs[0]}
            sd = {k: np.std([r[k] for r in runs]) for k in runs[0]}
            print(f"| {text} | {tol:g} | {eps:g} | {cell['1-way']:.4f} ± {sd['1-way']:.4f} | {cell['1-way uniform']:.4f} | "
                  f"{cell['1-way shrunk']:.4f} | {cell['noisy 1-way']:.4f} | {cell['2-way']:.4f} ± "
                  f"{sd['2-way']:.4f} | {cell['2-way dep.']:.4f} | {cell['3-way']:.4f} | {cell['marginals']:.0f} | {cell['iterations']:.0f} | {cell['seconds']:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
