"""Benchmark: the secure discrete Gaussian on 10^6 cells, the production sampler against OpenDP.

``SecureDiscreteGaussian`` (CKS20 Algorithms 1-3 vectorised on int64, randomness from os.urandom) and
OpenDP's ``make_gaussian`` (the previous production sampler, now the fallback and test reference)
draw the same number of values at several scales, one table per call, on one core.
Run: .venv/bin/python bench/bench_noise.py [--cells N] [--opendp-sigmas 1000]
"""

from __future__ import annotations

import argparse
import os
import time

from privsyn_spark.privacy.noise import OpenDPDiscreteGaussian, SecureDiscreteGaussian

SIGMAS = (0.5, 1.0, 3.0, 1000.0, 1e5)


def timed(sampler, sigma: float, cells: int) -> float:
    """Seconds for one call drawing ``cells`` values (best of the call after a small warm-up)."""
    sampler.discrete_gaussian(sigma, 1000)
    start = time.perf_counter()
    sampler.discrete_gaussian(sigma, cells)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--opendp-sigmas", type=float, nargs="*", default=[1000.0],
                        help="scales at which OpenDP is timed too (OpenDP's speed does not depend on sigma)")
    args = parser.parse_args()
    secure, opendp = SecureDiscreteGaussian(), OpenDPDiscreteGaussian()
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'sigma':>9} | {'sampler':<22} | {'cells':>9} | {'seconds':>8} | {'values/s':>11} | {'vs OpenDP':>9}")
    print("-" * 84)
    rows = [(sigma, "OpenDP make_gaussian", timed(opendp, sigma, args.cells)) for sigma in args.opendp_sigmas]
    opendp_rate = max(args.cells / seconds for _, _, seconds in rows) if rows else None
    rows += [(sigma, "SecureDiscreteGaussian", timed(secure, sigma, args.cells)) for sigma in SIGMAS]
    for sigma, name, seconds in rows:
        rate = args.cells / seconds
        ratio = f"{rate / opendp_rate:.1f}x" if opendp_rate else "-"
        print(f"{sigma:>9g} | {name:<22} | {args.cells:>9,} | {seconds:>8.2f} | {rate:>11,.0f} | {ratio:>9}")
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print("'vs OpenDP': against the fastest OpenDP rate above (OpenDP's cost per value does not depend on sigma)")


if __name__ == "__main__":
    main()
