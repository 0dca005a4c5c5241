"""The scaling model of docs/scaling.md: each step's seconds fitted to the measured runs, and projected.

The measured points are the tables of docs/benchmarks.md (each row below names its section); every
run there is local[2], so C = 2 executor cores. Each step's seconds are modelled as a non-negative
combination of its cost terms (n rows, d columns, pairs = d(d-1)/2, C executor cores):

    read+encode:                a + b * n*d / C + c * d + e * d^2
    count 1+2-way:              a + b * n*d / C + c * pairs
    count selected:             a + b * n*d / C
    noise+select:               a + b * pairs + c * pairs*d     (driver only)
    estimate:                   a + b * d                       (driver only; the model is at most 5e6 cells)
    synthesize, write:          a + b * n*d / C + c * d

fitted by non-negative least squares on relative residuals (every point weighs the same). It prints
the coefficients, each point's fit and residual, then the projection to 10^10 rows on N = 8, 64, 512
executors of ``--cores`` cores each, split into the executors' part (the n*d/C term) and the driver's.

    .venv/bin/python bench/scaling_fit.py [--cores 4] [--columns 15,97]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from scipy.optimize import nnls

SCALE, ENGINE, WIDE, GUM = "Scale", "Marginal engine", "Very wide tables", "GUM throughput"
ADULT = 48_842

# (step, rows, columns, executor cores, seconds, section of docs/benchmarks.md)
POINTS: list[tuple[str, int, int, int, float, str]] = [
    *[("read+encode", n, d, 2, t, s) for n, d, t, s in [
        (662_000, 97, 6.7, SCALE), (10**7, 50, 30.7, SCALE), (10**7, 15, 3.7, SCALE), (10**8, 15, 17.3, SCALE),
        (ADULT, 15, 2.8, SCALE), (5_000, 300, 52.7, WIDE), (300_000, 40, 11.8, ENGINE)]],
    *[("count 1+2-way", n, d, 2, t, s) for n, d, t, s in [
        (662_000, 97, 8.4, SCALE), (10**7, 50, 5.7, SCALE), (10**7, 15, 1.2, SCALE), (10**8, 15, 5.8, SCALE),
        (ADULT, 15, 0.25, SCALE), (5_000, 300, 42.5, WIDE), (10**7, 15, 1.42, ENGINE)]],
    *[("count selected", n, d, 2, t, SCALE) for n, d, t in [
        (662_000, 97, 0.3), (10**7, 50, 1.0), (10**7, 15, 0.5), (10**8, 15, 3.8), (ADULT, 15, 0.1)]],
    *[("noise+select", n, d, 2, t, s) for n, d, t, s in [
        (662_000, 97, 0.9, SCALE), (10**7, 50, 0.6, SCALE), (10**7, 15, 0.1, SCALE), (10**8, 15, 0.1, SCALE),
        (ADULT, 15, 0.1, SCALE), (5_000, 300, 179.2, WIDE)]],
    *[("estimate", n, d, 2, t, s) for n, d, t, s in [
        (662_000, 97, 26.3, SCALE), (10**7, 50, 21.1, SCALE), (10**7, 15, 15.0, SCALE), (10**8, 15, 15.8, SCALE),
        (ADULT, 15, 8.7, SCALE), (5_000, 300, 96.0, WIDE)]],
    # GUM throughput: one shard on one core, 200,000 records, model start (records / rate)
    *[("synthesize", n, d, c, t, s) for n, d, c, t, s in [
        (662_000, 97, 2, 22.4, SCALE), (10**7, 50, 2, 126.1, SCALE), (10**7, 15, 2, 30.1, SCALE),
        (10**8, 15, 2, 215.2, SCALE), (ADULT, 15, 2, 2.7, SCALE), (5_000, 300, 2, 42.6, WIDE),
        (200_000, 15, 1, 200_000 / 141_227, GUM), (200_000, 50, 1, 200_000 / 64_181, GUM),
        (200_000, 97, 1, 200_000 / 21_451, GUM)]],
    *[("write", n, d, 2, t, s) for n, d, t, s in [
        (662_000, 97, 7.1, SCALE), (10**7, 50, 43.9, SCALE), (10**7, 15, 12.4, SCALE), (10**8, 15, 105.6, SCALE),
        (ADULT, 15, 1.35, SCALE), (5_000, 300, 15.2, WIDE)]],
]


def _pairs(d: float) -> float:
    return d * (d - 1) / 2


Terms = list[tuple[str, Callable[[float, float, float], float], bool]]  # name, f(n, d, C), runs on executors
LINEAR: Terms = [("fixed", lambda n, d, c: 1.0, False), ("n*d/C", lambda n, d, c: n * d / c, True)]
PER_COLUMN: Terms = [*LINEAR, ("d", lambda n, d, c: d, False)]
TERMS: dict[str, Terms] = {
    "read+encode": [*PER_COLUMN, ("d^2", lambda n, d, c: d * d, False)],
    "count 1+2-way": [*LINEAR, ("pairs", lambda n, d, c: _pairs(d), False)],
    "count selected": LINEAR,
    "noise+select": [("fixed", lambda n, d, c: 1.0, False), ("pairs", lambda n, d, c: _pairs(d), False),
                     ("pairs*d", lambda n, d, c: _pairs(d) * d, False)],
    "estimate": [("fixed", lambda n, d, c: 1.0, False), ("d", lambda n, d, c: d, False)],
    "synthesize": PER_COLUMN,
    "write": PER_COLUMN,
}


def fit(step: str) -> np.ndarray:
    """Non-negative least squares of one step's terms on the relative residuals of its points."""
    rows = [p for p in POINTS if p[0] == step]
    x = np.array([[f(n, d, c) for _, f, _ in TERMS[step]] for _, n, d, c, _, _ in rows])
    t = np.array([p[4] for p in rows])
    coef, _ = nnls(x / t[:, None], np.ones(len(t)))
    return np.asarray(coef)


def predict(step: str, coef: np.ndarray, n: float, d: float, c: float) -> tuple[float, float]:
    """(executors' seconds, driver's seconds) of one step."""
    parts = [(k * f(n, d, c), on_exec) for k, (_, f, on_exec) in zip(coef, TERMS[step])]
    return sum(v for v, e in parts if e), sum(v for v, e in parts if not e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=4, help="cores per executor in the projection")
    parser.add_argument("--columns", default="15,97", help="widths of the projection")
    args = parser.parse_args()
    coefs = {step: fit(step) for step in TERMS}
    print("| step | term: coefficient (s per unit) |\n|---|---|")
    for step, coef in coefs.items():
        print(f"| {step} | " + ", ".join(f"{name}: {k:.3g}" for k, (name, _, _) in zip(coef, TERMS[step])) + " |")
    print("\n| step | rows x columns (cores) | measured s | fitted s | residual | section |\n|---|---|---:|---:|---:|---|")
    for step, n, d, c, t, section in POINTS:
        fitted = sum(predict(step, coefs[step], n, d, c))
        print(f"| {step} | {n:,} x {d} ({c}) | {t:.2f} | {fitted:.2f} | {(fitted - t) / t:+.0%} | {section} |")
    n = 10**10
    for d in (int(w) for w in args.columns.split(",")):
        print(f"\nProjection: 10^10 rows x {d} columns, executors of {args.cores} cores; seconds as "
              "executors' part + driver's part")
        print("| step | N = 8 | N = 64 | N = 512 |\n|---|---:|---:|---:|")
        totals = dict.fromkeys((8, 64, 512), 0.0)
        for step, coef in coefs.items():
            cells = []
            for e in totals:
                on_exec, on_driver = predict(step, coef, n, d, e * args.cores)
                totals[e] += on_exec + on_driver
                cells.append(f"{on_exec:,.0f} + {on_driver:,.0f}")
            print(f"| {step} | " + " | ".join(cells) + " |")
        print("| total | " + " | ".join(f"**{v:,.0f} s ({v / 3600:.1f} h)**" for v in totals.values()) + " |")


if __name__ == "__main__":
    main()
