"""A straightforward pandas implementation of GUM's updates (the benchmark baseline, not library code).

Same updates as ``privsyn_spark.synthesize.gum.kernel`` with ``candidate_pool=1`` and no polishing, appending or
separation: start from records whose every attribute follows its 1-way target; each iteration visits
every (maximal) target marginal, over-counted cells lose ``min(n_s - n_t, beta n_s)`` uniformly random
records (beta by bisection, as in the reference implementation), under-counted cells gain
``min(n_t - n_s, alpha n_s)`` (``alpha n_t`` when empty) by Duplicate or Replace; alpha step decay;
shuffle between passes. Written the plain way: ``groupby`` for counts and cell members, Python loops over
cells, ``DataFrame.iloc`` assignments.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.kernel import GumConfig


def _beta(excess: np.ndarray, current: np.ndarray, total: float) -> float:
    """Bisection for beta with sum(min(excess, beta * current)) = total."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.minimum(excess, mid * current).sum() < total:
            lo = mid
        else:
            hi = mid
    return hi


def gum_pandas(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, iterations: int,
               config: GumConfig | None = None, seed: int = 0) -> tuple[pd.DataFrame, list[dict]]:
    """Run plain pandas GUM; returns the records and, per iteration, the L1 to every target."""
    config = config or GumConfig()
    rng = np.random.default_rng(seed)
    scaled = {k: np.asarray(t, float) * n / np.asarray(t, float).sum() for k, t in targets.items()}

    columns = {}
    for a, size in domain.items():
        one_way = next((t.sum(axis=tuple(i for i, b in enumerate(k) if b != a)) for k, t in scaled.items() if a in k),
                       np.full(size, n / size))
        counts = np.floor(one_way).astype(int)
        extra = n - counts.sum()
        counts[np.argsort(counts - one_way)[:extra]] += 1
        columns[a] = rng.permutation(np.repeat(np.arange(size), counts))
    df = pd.DataFrame(columns)

    keys = [k for k in scaled if not any(set(k) < set(o) for o in scaled)]
    history = []
    for t in range(iterations):
        alpha = config.alpha(t)
        for key in keys:
            cols = list(key)
            positions = [df.columns.get_loc(c) for c in cols]
            cells = list(itertools.product(*(range(domain[a]) for a in key)))
            target = pd.Series(scaled[key].ravel(), index=pd.MultiIndex.from_tuples(cells, names=cols))
            current = df.groupby(cols).size().reindex(target.index, fill_value=0).astype(float)
            members = df.groupby(cols).indices
            share = config.duplicate_share(float((current - target).abs().sum()) / n)

            gains = {}
            for cell in cells:
                s, tt = current[cell], target[cell]
                if s < tt:
                    g = min(tt - s, alpha * s) if s > 0 else min(tt, alpha * tt)
                    g = int(np.floor(g) + (rng.random() < g - np.floor(g)))
                    if g:
                        gains[cell] = g
            total = sum(gains.values())
            if total == 0:
                continue
            over = [cell for cell in cells if current[cell] > target[cell]]
            excess = np.array([current[c] - target[c] for c in over])
            have = np.array([current[c] for c in over])
            beta = _beta(excess, have, total) if excess.sum() > total else 1.0
            removed = []
            for cell, e, s in zip(over, excess, have):
                k = min(int(round(min(e, beta * s))), int(s))
                if k:
                    removed.extend(rng.choice(members[cell], k, replace=False))
            removed = rng.permutation(np.array(removed, dtype=int))

            pointer = 0
            for cell, g in gains.items():
                dst = removed[pointer: pointer + g]
                pointer += g
                if dst.size == 0:
                    break
                dup = int(rng.binomial(dst.size, share)) if current[cell] > 0 else 0
                if dup:
                    pool = members[cell]
                    src = rng.choice(pool, dup, replace=dup > len(pool))
                    df.iloc[dst[:dup]] = df.iloc[src].to_numpy()
                if dst.size > dup:
                    df.iloc[dst[dup:], positions] = np.array(cell)
        df = df.sample(frac=1, random_state=rng).reset_index(drop=True)
        errors = {}
        for key, tab in scaled.items():
            got = df.groupby(list(key)).size()
            full = pd.Series(tab.ravel(), index=pd.MultiIndex.from_tuples(
                list(itertools.product(*(range(domain[a]) for a in key))), names=list(key))
                if len(key) > 1 else pd.Index(range(domain[key[0]]), name=key[0]))
            errors[key] = float((got.reindex(full.index, fill_value=0) - full).abs().sum())
        history.append(errors)
    return df, history


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.synthesize.adult_data import adult_targets

    domain, records, targets = adult_targets()
    started = time.perf_counter()
    _, hist = gum_pandas(domain, targets, records.shape[0], iterations=3)
    print(f"{time.perf_counter() - started:.1f} s, L1/n per iteration:",
          [round(sum(h.values()) / records.shape[0], 4) for h in hist])
