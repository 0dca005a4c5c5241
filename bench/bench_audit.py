"""The privacy audit's black-box game: the pipeline on a small table, D against D plus one canary person (one
row with a combination no one else has), many runs at each epsilon; three attacks on the synthetic table
give an empirical epsilon with its 95 % interval, printed beside the stated epsilon (docs/privacy-audit.md).

Each run is the pipeline's driver path on exact counts: ``measure_privately`` (the secure sampler, every
release of a real run), ``consistent_targets`` (Private-PGM) and GUM (``synthesize``), the same code a run
drives after Spark has counted (the engine's counts are exact, so counting them in numpy changes nothing
that is released). Attacks, each a score that is higher when the canary was in:

- ``count``: synthetic records with the canary's combination;
- ``nearest``: minus the Hamming distance from the canary to the nearest synthetic record;
- ``density``: a DOMIAS-style ratio, the synthetic share of records within distance 1 of the canary over
  that share in a reference sample of the population (van Breugel et al. 2023).

Each attack's threshold is chosen on half the runs and measured on the other half
(``tests/audit/audit_stats.threshold_audit``); the table reports every attack and the best one.

    .venv/bin/python bench/bench_audit.py                          # 200 runs at epsilon 1, 4, 8 (hours)
    .venv/bin/python bench/bench_audit.py --runs 40 --epsilons 8   # a quick look
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.targets import consistent_targets
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.synthesize.gum.kernel import synthesize
from tests.audit.audit_stats import threshold_audit

DOMAIN = Domain.from_dict({"a": 6, "b": 5, "c": 4, "d": 4, "e": 3})
DELTA = 1e-9
ATTACKS = ("count", "nearest", "density")


def population(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows of a chain-dependent table (each column leans on the one before it)."""
    rows = np.empty((n, len(DOMAIN)), dtype=np.int64)
    rows[:, 0] = rng.integers(0, DOMAIN.sizes[0], n)
    for j, size in enumerate(DOMAIN.sizes[1:], start=1):
        rows[:, j] = np.where(rng.random(n) < 0.7, rows[:, j - 1] % size, rng.integers(0, size, n))
    return rows


def canary_row(rows: np.ndarray) -> np.ndarray:
    """A combination no row of ``rows`` has (the last codes of every column, the least likely here)."""
    canary = np.array([s - 1 for s in DOMAIN.sizes], dtype=np.int64)
    assert not (rows == canary).all(axis=1).any()
    return canary


def counts(rows: np.ndarray, attrs: tuple[str, ...], recode: dict | None = None) -> np.ndarray:
    idx = [DOMAIN.attrs.index(a) for a in attrs]
    codes = tuple(rows[:, i] if recode is None else recode[a][rows[:, i]] for a, i in zip(attrs, idx))
    shape = tuple(DOMAIN[a] if recode is None else int(recode[a].max()) + 1 for a in attrs)
    out = np.zeros(shape, dtype=np.int64)
    np.add.at(out, codes, 1)
    return out


def synthetic(rows: np.ndarray, epsilon: float, seed: int) -> tuple[np.ndarray, dict]:
    """One run of the pipeline's driver path on ``rows``: the synthetic records (merged codes) and value maps."""
    pairs = [(x, y) for i, x in enumerate(DOMAIN.attrs) for y in DOMAIN.attrs[i + 1:]]
    m = measure_privately({(a,): counts(rows, (a,)) for a in DOMAIN.attrs},
                          indif_scores({p: counts(rows, p) for p in pairs}),
                          lambda ms, recode: {x: counts(rows, x, recode) for x in ms}, DOMAIN,
                          run_id=f"audit-{seed}", schema_hash="bench", epsilon=epsilon, delta=DELTA)
    rng = np.random.default_rng(seed)
    tables, _, info = consistent_targets(m.marginals, m.domain, m.noisy_total, rng=rng)
    n = max(1, int(round(m.noisy_total)))
    return synthesize(m.domain, tables, n, rng=rng, model=info.get("model")).records, m.value_maps


def scores(records: np.ndarray, value_maps: dict, canary: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """The three attacks' scores for the canary (module docstring), on the merged codes."""
    code = np.array([value_maps[a][c] for a, c in zip(DOMAIN.attrs, canary)])
    ref = np.column_stack([value_maps[a][reference[:, i]] for i, a in enumerate(DOMAIN.attrs)])
    distance = (records != code).sum(axis=1)
    near_ref = ((ref != code).sum(axis=1) <= 1).mean()
    return {"count": float((distance == 0).sum()), "nearest": -float(distance.min(initial=len(DOMAIN))),
            "density": float((distance <= 1).mean() / max(near_ref, 1e-6))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs on D and on D' at each epsilon")
    parser.add_argument("--epsilons", default="1,4,8")
    parser.add_argument("--rows", type=int, default=1000, help="rows of D")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    d = population(args.rows, rng)
    reference = population(20 * args.rows, np.random.default_rng(1))
    canary = canary_row(d)
    d2 = np.vstack([d, canary])
    print(f"| stated epsilon (delta {DELTA:g}) | runs each | " + " | ".join(ATTACKS) + " | best | seconds/run |")
    print("|---:|---:|" + "---|" * (len(ATTACKS) + 2))
    for epsilon in (float(e) for e in args.epsilons.split(",")):
        start = time.perf_counter()
        got: dict[str, list[list[float]]] = {a: [[], []] for a in ATTACKS}
        for run in range(args.runs):
            for side, rows in enumerate((d, d2)):
                records, maps = synthetic(rows, epsilon, seed=2 * run + side)
                for attack, value in scores(records, maps, canary, reference).items():
                    got[attack][side].append(value)
        audits = {a: threshold_audit(np.array(s[0]), np.array(s[1]), DELTA) for a, s in got.items()}
        best = max(audits.values(), key=lambda e: e.lower)
        cells = [f"{e.point:.2f} [{e.lower:.2f}, {e.upper:.2f}]" for e in audits.values()]
        per_run = (time.perf_counter() - start) / (2 * args.runs)
        print(f"| {epsilon:g} | {args.runs} | " + " | ".join(cells) + f" | {best.lower:.2f} | {per_run:.2f} |")
    print(f"\nEmpirical epsilon: point [95 % interval], threshold picked on half the runs; 'best' is the largest "
          f"lower end. {args.rows} rows, canary: one row with an unseen combination. Command: "
          f".venv/bin/python bench/bench_audit.py --runs {args.runs} --epsilons {args.epsilons} --rows {args.rows}")


if __name__ == "__main__":
    main()
