"""Benchmark: PrivSyn selection on 100 attributes (4,950 pairs) on the driver.

Times the noisy InDif release (secure OpenDP sampler), DenseMarg (PrivSyn Algorithm 1) and marginal
combining (Algorithm 2) on synthetic InDif scores: a planted set of strongly dependent pairs plus
sampling-level InDif for the rest, attribute sizes 2..20, n = 1,000,000 rows. The worst case
(every pair selected) is timed too. Run: .venv/bin/python bench/bench_selection.py
"""

from __future__ import annotations

import math
import time
from itertools import combinations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.accounting import Accountant, rho_from_eps_delta
from privsyn_spark.privacy.combine import combine_marginals
from privsyn_spark.privacy.densemarg import dense_marg
from privsyn_spark.privacy.indif import release_noisy_indif
from privsyn_spark.privacy.noise import SecureDiscreteGaussian


def synthetic_scores(rng: np.random.Generator, d: int, n: int) -> tuple[Domain, dict[tuple[str, ...], float]]:
    """Domain with sizes 2..20 and InDif scores: ~5 % planted dependent pairs, the rest at sampling level."""
    sizes = rng.integers(2, 21, d)
    domain = Domain(tuple(f"c{i:03d}" for i in range(d)), tuple(int(s) for s in sizes))
    scores = {}
    for a, b in combinations(domain.attrs, 2):
        cells = domain[a] * domain[b]
        base = 0.8 * math.sqrt(n * cells)  # InDif of an independent pair from sampling noise alone
        planted = rng.random() < 0.05
        scores[(a, b)] = float(rng.uniform(0.05, 0.6) * n) if planted else float(base * rng.uniform(0.5, 1.5))
    return domain, scores


def main() -> None:
    rng = np.random.default_rng(7)
    d, n, delta = 100, 1_000_000, 1e-9
    domain, scores = synthetic_scores(rng, d, n)
    pairs = list(combinations(domain.attrs, 2))
    cells = {p: domain.cells(p) for p in pairs}
    sampler = SecureDiscreteGaussian()
    rows = []
    for eps in (0.1, 1.0, 10.0):
        rho = rho_from_eps_delta(eps, delta)
        acct = Accountant(rho)
        t0 = time.perf_counter()
        noisy = release_noisy_indif(scores, pairs, 0.1 * rho, accountant=acct, sampler=sampler)
        t1 = time.perf_counter()
        sel = dense_marg(noisy, cells, 0.8 * rho)
        t2 = time.perf_counter()
        final = combine_marginals(domain, sel.pairs)
        t3 = time.perf_counter()
        rows.append((f"eps={eps:g}", len(sel.pairs), len(final), t1 - t0, t2 - t1, t3 - t2))
    # Worst case for DenseMarg: every pair strongly dependent, so all 4,950 are selected one by one.
    heavy = {p: 1e12 for p in pairs}
    t0 = time.perf_counter()
    sel = dense_marg(heavy, cells, 0.8 * rho_from_eps_delta(10.0, delta))
    t1 = time.perf_counter()
    final = combine_marginals(domain, sel.pairs)
    t2 = time.perf_counter()
    rows.append(("all selected", len(sel.pairs), len(final), float("nan"), t1 - t0, t2 - t1))

    print(f"selection on d={d} attributes ({len(pairs)} pairs), n={n:,}, delta={delta:g}; driver seconds")
    header = ("case", "selected", "final", "InDif noise s", "DenseMarg s", "combine s")
    print(f"| {header[0]:<12} | " + " | ".join(f"{h:>{w}}" for h, w in zip(header[1:], (8, 5, 13, 11, 9))) + " |")
    print(f"|{'-' * 14}|{'-' * 10}|{'-' * 7}|{'-' * 15}|{'-' * 13}|{'-' * 11}|")
    for case, k, f, ti, ts, tc in rows:
        print(f"| {case:<12} | {k:>8} | {f:>5} | {ti:>13.4f} | {ts:>11.4f} | {tc:>9.4f} |")


if __name__ == "__main__":
    main()
