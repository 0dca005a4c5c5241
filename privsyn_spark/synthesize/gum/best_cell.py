"""GUM's best-cell moves: improving-only Replace moves that send each removed record to its best gain cell.

Part of PrivSyn's GUM (Section 5.3), used by :func:`~privsyn_spark.synthesize.gum.update.update_marginal`
when polishing: improving-only updates within :attr:`~privsyn_spark.synthesize.gum.plan.GumConfig.best_cell_pairs`.
"""

from __future__ import annotations

import numpy as np

from privsyn_spark.synthesize.gum.marginal_set import MarginalSet, cell_index


def best_cell_moves(records: np.ndarray, removed: np.ndarray, marginals: MarginalSet, which: int,
                     judged: list[int], cells: np.ndarray, gains: np.ndarray, candidates: int,
                     rng: np.random.Generator, passes: int = 8) -> int:
    """Improving-only Replace moves, in place: removed records go to their best gain cell of ``which``.

    Each removed record is offered ``candidates`` of the gain ``cells`` (all of them when there are no
    more, else drawn in proportion to their ``gains``); the change of the summed L1 over the ``judged``
    marginals is computed for every (record, candidate) pair. In each pass every cell with gains left
    takes the record whose move there lowers the L1 most, and the counts are updated before the next
    pass re-judges the others, so records do not pile into the same cells of other marginals (moves
    judged all at once against the same counts overshoot there). Records with no improving move on offer
    keep their values. Returns the number of records moved.
    """
    cols, shape = marginals.cols[which], marginals.shapes[which]
    values = dict(zip(cols, np.unravel_index(cells, shape)))
    left = gains.astype(np.int64)
    if cells.size <= candidates:
        offered = np.broadcast_to(np.arange(cells.size), (removed.size, cells.size))
    else:
        cum = np.cumsum(left)
        offered = np.minimum(np.searchsorted(cum, rng.random((removed.size, candidates)) * cum[-1], side="right"),
                             cells.size - 1)
    overlapping = [i for i in judged if set(marginals.cols[i]) & set(cols)]  # the others do not change
    waiting = np.ones(removed.size, dtype=bool)
    moved = 0
    for _ in range(passes):  # passes over the assignment, not over records
        rows = np.flatnonzero(waiting)
        old, cand = records[removed[rows]], offered[rows]
        delta = np.zeros(cand.shape)
        marginals.work.scored += len(overlapping)
        for i in overlapping:
            before = cell_index(old, marginals.cols[i], marginals.shapes[i])
            after = np.zeros(cand.shape, dtype=np.int64)
            for c, size in zip(marginals.cols[i], marginals.shapes[i]):
                after *= size
                after += values[c][cand] if c in values else old[:, c, None].astype(np.int64)
            e_before, e_after = marginals.excess(i, before)[:, None], marginals.excess(i, after)
            step = np.abs(e_before - 1) - np.abs(e_before) + np.abs(e_after + 1) - np.abs(e_after)
            delta += np.where(after != before[:, None], step, 0.0)
        delta[left[cand] <= 0] = np.inf
        pick = np.argmin(delta, axis=1)
        best, change = cand[np.arange(rows.size), pick], delta[np.arange(rows.size), pick]
        want = np.flatnonzero(change < 0)
        waiting[rows[change >= 0]] = False  # no improving move on offer: the record stays as it is
        if want.size == 0:
            break
        want = want[np.lexsort((change[want], best[want]))]  # by cell, best move first
        won = want[np.r_[True, best[want][1:] != best[want][:-1]]]  # one record per cell and pass
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
