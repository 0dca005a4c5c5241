"""GUM's vectorised polishing steps against plain references: best-cell moves and the candidate ranking."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.best_cell import best_cell_moves
from privsyn_spark.synthesize.gum.kernel import MarginalSet, cell_index, marginal_counts
from privsyn_spark.synthesize.gum.update import _by_group_best_first

DOMAIN = Domain(tuple(f"a{j}" for j in range(8)), (3, 5, 4, 6, 3, 5, 4, 2))
KEYS = [("a0", "a1"), ("a1", "a2"), ("a0", "a3"), ("a2", "a3", "a4"), ("a4", "a5"), ("a1", "a6"), ("a6", "a7"),
        ("a5", "a7"), ("a0", "a1", "a5")]


def reference_moves(records, removed, marginals, which, judged, cells, gains, candidates, rng, passes=8):
    """Best-cell moves one marginal at a time, with count tables of their own (the previous implementation)."""
    cols, shape = marginals.cols[which], marginals.shapes[which]
    values = dict(zip(cols, np.unravel_index(cells, shape)))
    left = gains.astype(np.int64)
    if cells.size <= candidates:
        offered = np.broadcast_to(np.arange(cells.size), (removed.size, cells.size))
    else:
        cum = np.cumsum(left)
        offered = np.minimum(np.searchsorted(cum, rng.random((removed.size, candidates)) * cum[-1], side="right"),
                             cells.size - 1)
    overlapping = [i for i in judged if set(marginals.cols[i]) & set(cols)]
    waiting = np.ones(removed.size, dtype=bool)
    moved = 0
    for _ in range(passes):
        rows = np.flatnonzero(waiting)
        old, cand = records[removed[rows]], offered[rows]
        delta = np.zeros(cand.shape)
        for i in overlapping:
            before = cell_index(old, marginals.cols[i], marginals.shapes[i]).astype(np.int64)
            after = np.zeros(cand.shape, dtype=np.int64)
            for c, size in zip(marginals.cols[i], marginals.shapes[i]):
                after = after * size + (values[c][cand] if c in values else old[:, c, None].astype(np.int64))
            e_before = (marginals.counts[i][before] - marginals.targets[i][before])[:, None]
            e_after = marginals.counts[i][after] - marginals.targets[i][after]
            step = np.abs(e_before - 1) - np.abs(e_before) + np.abs(e_after + 1) - np.abs(e_after)
            delta += np.where(after != before[:, None], step, 0.0)
        delta[left[cand] <= 0] = np.inf
        pick = np.argmin(delta, axis=1)
        best, change = cand[np.arange(rows.size), pick], delta[np.arange(rows.size), pick]
        want = np.flatnonzero(change < 0)
        waiting[rows[change >= 0]] = False
        if want.size == 0:
            break
        want = want[np.lexsort((change[want], best[want]))]
        won = want[np.r_[True, best[want][1:] != best[want][:-1]]]
        new = old[won].copy()
        for c, v in values.items():
            new[:, c] = v[best[won]]
        records[removed[rows[won]]] = new
        marginals.replace_rows(old[won], new)
        waiting[rows[won]] = False
        moved += won.size
        left -= np.bincount(best[won], minlength=cells.size)
        if not waiting.any() or left.sum() == 0:
            break
    return moved


def setup(seed: int, n: int = 6_000):
    rng = np.random.default_rng(seed)
    records = np.asfortranarray(rng.integers(0, DOMAIN.sizes, size=(n, len(DOMAIN))).astype(np.uint8))
    tables = {k: np.clip(marginal_counts(records, DOMAIN, k) + rng.normal(0, 15, DOMAIN.shape(k)), 0, None)
              for k in KEYS}
    return records, tables, rng


@pytest.mark.parametrize("seed, which, candidates, block", [(0, 0, 4, 1 << 20), (1, 3, 6, 1 << 20), (2, 8, 64, 1 << 20),
                                                           (3, 3, 5, 97)])
def test_best_cell_moves_match_the_marginal_by_marginal_reference(seed, which, candidates, block):
    """Same moves, same tables (bit for bit) as judging each marginal with its own tables; counts stay exact."""
    records, tables, rng = setup(seed)
    marginals = MarginalSet(records, DOMAIN, KEYS, tables)
    under = np.flatnonzero(marginals.counts[which] < marginals.targets[which])
    cells = np.sort(rng.choice(under, min(under.size, 12), replace=False))
    gains = rng.integers(1, 6, cells.size)
    removed = rng.choice(records.shape[0], 400, replace=False)
    judged = [which, *(i for i in range(len(KEYS)) if i != which)]
    ref_records, ref_marginals = records.copy(order="F"), MarginalSet(records, DOMAIN, KEYS, tables)
    draws = rng.bit_generator.state

    moved = best_cell_moves(records, removed, marginals, which, judged, cells, gains, candidates, rng, block=block)
    rng.bit_generator.state = draws
    ref_moved = reference_moves(ref_records, removed, ref_marginals, which, judged, cells, gains, candidates, rng)

    assert moved == ref_moved > 0
    assert np.array_equal(records, ref_records)
    for key, counts in zip(marginals.keys, marginals.counts):
        assert np.array_equal(counts, marginal_counts(records, DOMAIN, key).ravel()), key


def test_candidates_ranked_like_a_lexsort_by_group_and_score():
    """The radix ranking equals ``np.lexsort((-score, group))``: any floats, exact ties, signed zeros."""
    rng = np.random.default_rng(5)
    for trial in range(60):
        group = np.sort(rng.integers(0, 40, 3_000))
        if trial % 3 == 0:
            score = rng.integers(-20, 20, group.size) * 0.37  # many exact ties
        elif trial % 3 == 1:
            score = rng.normal(0, 10.0 ** rng.integers(-8, 8), group.size)  # close values, every magnitude
        else:
            score = rng.choice([-0.0, 0.0, 1e-300, -1e-300, 5.0, -5.0, 1e300], group.size)
        assert np.array_equal(_by_group_best_first(score, group, 40), np.lexsort((-score, group)))
    same = np.full(10, 2.5)
    assert np.array_equal(_by_group_best_first(same, np.zeros(10, dtype=np.int64), 1), np.arange(10))
