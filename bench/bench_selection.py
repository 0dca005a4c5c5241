"""Benchmark: PrivSyn selection on 100 attributes (4,950 pairs) on the driver.

Times the noisy InDif release (secure OpenDP sampler), DenseMarg (PrivSyn Algorithm 1) and marginal
combining (Algorithm 2) on synthetic InDif scores: a planted set of strongly dependent pairs plus
sampling-level InDif for the rest, attribute sizes 2..20, n = 1,000,000 rows. The worst case
(every pair selected) is timed too, and each case again with the model-size bound (junction tree
<= --model-cells cells in total; "rejected" = candidates the bound dropped).
Run: .venv/bin/python bench/bench_selection.py [--model-cells 1e7]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from itertools import combinations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.accounting import Accountant, rho_from_eps_delta
from privsyn_spark.privacy.noise import SecureDiscreteGaussian
from privsyn_spark.select.combine import combine_marginals
from privsyn_spark.select.densemarg import dense_marg
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET, model_cells
from privsyn_spark.select.noisy_indif import release_noisy_indif


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-cells", type=float, default=DEFAULT_CELL_BUDGET)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    d, n, delta = 100, 1_000_000, 1e-9
    domain, scores = synthetic_scores(rng, d, n)
    pairs = list(combinations(domain.attrs, 2))
    cells = {p: domain.cells(p) for p in pairs}
    sampler = SecureDiscreteGaussian()
    rows = []

    def select(case: str, noisy, rho: float, t_indif: float) -> None:
        for bound in (None, args.model_cells):
            t0 = time.perf_counter()
            sel = dense_marg(noisy, cells, rho, domain=domain, model_cells=bound)
            t1 = time.perf_counter()
            final = combine_marginals(domain, sel.pairs)
            t2 = time.perf_counter()
            size = model_cells(domain, final)
            rows.append((case, "-" if bound is None else f"{bound:.0e}", len(sel.pairs), sel.rejected, len(final),
                         size, t_indif, t1 - t0, t2 - t1))

    for eps in (0.1, 1.0, 10.0):
        rho = rho_from_eps_delta(eps, delta)
        acct = Accountant(rho)
        t0 = time.perf_counter()
        noisy = release_noisy_indif(scores, pairs, 0.1 * rho, accountant=acct, sampler=sampler)
        select(f"eps={eps:g}", noisy, 0.8 * rho, time.perf_counter() - t0)
    # Worst case for DenseMarg: every pair strongly dependent, so all 4,950 are candidates one by one.
    select("all selected", {p: 1e12 for p in pairs}, 0.8 * rho_from_eps_delta(10.0, delta), float("nan"))

    print(f"selection on d={d} attributes ({len(pairs)} pairs), n={n:,}, delta={delta:g}; driver seconds, "
          f"load {os.getloadavg()[0]:.1f}")
    print("| case | bound | selected | rejected | final | tree cells | InDif noise s | DenseMarg s | combine s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for case, bound, k, r, f, size, ti, ts, tc in rows:
        print(f"| {case} | {bound} | {k} | {r} | {f} | {size:.3g} | {ti:.4f} | {ts:.4f} | {tc:.4f} |")


if __name__ == "__main__":
    main()
