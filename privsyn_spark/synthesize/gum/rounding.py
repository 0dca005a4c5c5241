"""Rounding GUM's real-valued counts to integers with exact totals: the one home of that rounding.

Each row is scaled to its total and rounded by systematic sampling of its cumulative sum (one uniform
offset per row): every entry becomes the floor or the ceiling of its scaled value, the row sums are
exact, and the rounding is unbiased. Used for the initial 1-way counts and the removals of an update
(:mod:`.update`), the appended attributes' counts (:mod:`.append`) and the driver's split of appended
counts across shards (:mod:`privsyn_spark.synthesize.sharded.reconcile`).
"""

from __future__ import annotations

import numpy as np


def round_rows(want: np.ndarray, totals: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Non-negative int64 rows, each entry the floor or ceiling of ``want`` scaled to its row's integer
    total in ``totals`` (a row without mass spreads its total evenly), with exact row sums."""
    want = np.asarray(want, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.int64)
    sums = want.sum(axis=1, keepdims=True)
    scaled = np.where(sums > 0, want * (totals[:, None] / np.where(sums > 0, sums, 1.0)),
                      totals[:, None] / max(want.shape[1], 1))
    cum = np.cumsum(scaled, axis=1)
    y = np.floor(cum + rng.random((want.shape[0], 1))).astype(np.int64)
    y = np.maximum.accumulate(np.minimum(y, totals[:, None]), axis=1)  # float round-off never breaks the order
    y[:, -1] = totals
    return np.diff(y, axis=1, prepend=0)


def round_total(x: np.ndarray, rng: np.random.Generator, total: int | None = None) -> np.ndarray:
    """Non-negative reals rounded to integers summing to ``total`` (default: ``x``'s rounded sum)."""
    x = np.asarray(x, dtype=np.float64)
    want = int(round(float(x.sum()))) if total is None else int(total)
    return round_rows(x[None, :], np.array([want]), rng)[0]


def stochastic_round(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unbiased, independent randomised rounding of non-negative reals to int64 (no fixed total)."""
    low = np.floor(x)
    return (low + (rng.random(x.shape) < (x - low))).astype(np.int64)
