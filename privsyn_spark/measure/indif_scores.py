"""InDif dependency scores from exact count tables (PrivSyn Section 4.2).

InDif_ab = || M_ab - M_a x M_b / n ||_1 in count scale, computed on the driver from the
marginal engine's 1-way and 2-way counts (numpy only; the noisy release is in privacy/).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def indif_score(two_way: np.ndarray, n: float) -> float:
    """InDif of one pair from its 2-way count table (1-way tables are its row/column sums)."""
    if n <= 0:
        return 0.0
    row = two_way.sum(axis=1, dtype=np.float64)
    col = two_way.sum(axis=0, dtype=np.float64)
    return float(np.abs(two_way - np.outer(row, col) / n).sum())


def indif_scores(two_way: Mapping[tuple[str, ...], np.ndarray]) -> dict[tuple[str, ...], float]:
    """InDif for every pair in ``two_way`` (keys are canonical attribute pairs)."""
    scores: dict[tuple[str, ...], float] = {}
    for pair, table in two_way.items():
        if len(pair) != 2:
            raise ValueError(f"indif_scores: {pair} is not a pair")
        scores[pair] = indif_score(table, float(table.sum()))
    return scores
