"""GUM's best-cell moves: improving-only Replace moves that send each removed record to its best gain cell.

Part of PrivSyn's GUM (Section 5.3), used by :func:`~privsyn_spark.synthesize.gum.update.update_marginal`
when polishing: improving-only updates within :attr:`~privsyn_spark.synthesize.gum.structure.GumConfig.best_cell_pairs`.
"""

from __future__ import annotations

import numpy as np

from privsyn_spark.synthesize.gum.marginal_set import MarginalSet


def best_cell_moves(records: np.ndarray, removed: np.ndarray, marginals: MarginalSet, which: int,
                    judged: list[int], cells: np.ndarray, gains: np.ndarray, candidates: int,
                    rng: np.random.Generator, passes: int = 8, block: int = 1 << 20) -> int:
    """Improving-only Replace moves, in place: removed records go to their best gain cell of ``which``.

    Each removed record is offered ``candidates`` of the gain ``cells`` (all of them when there are no
    more, else drawn in proportion to their ``gains``); the change of the summed L1 over the ``judged``
    marginals is computed for every (record, candidate) pair. In each pass every cell with gains left
    takes the record whose move there lowers the L1 most, and the counts are updated before the next
    pass re-judges the others, so records do not pile into the same cells of other marginals (moves
    judged all at once against the same counts overshoot there). Records with no improving move on offer
    keep their values. Returns the number of records moved.

    A waiting record keeps its values until it moves, so the positions of its cell in every judged
    marginal overlapping ``which`` are computed once (those after an offered move: one addition away);
    a pass reads the L1 changes there from tables of those marginals' cells, over all of them at once
    (``block`` bounds the marginals x records x candidates read at a time).
    """
    cols, shape = marginals.cols[which], marginals.shapes[which]
    values = np.unravel_index(cells, shape)
    left = gains.astype(np.int64)
    if cells.size <= candidates:
        offered = np.broadcast_to(np.arange(cells.size), (removed.size, cells.size))
    else:  # gain units drawn uniformly: the cell of unit floor(u x total) (a table, not a search per draw)
        cum = np.cumsum(left)
        unit_cell = np.minimum(np.searchsorted(cum, np.arange(cum[-1] + 1), side="right"), cells.size - 1)
        offered = unit_cell[(rng.random((removed.size, candidates)) * cum[-1]).astype(np.int64)]
    overlapping = np.asarray([i for i in judged if set(marginals.cols[i]) & set(cols)], dtype=np.int64)
    local, where = marginals.compact(overlapping)  # their cells, laid out one after the other
    old = records[removed]
    # a move rewrites ``which``'s columns only: in marginal i it shifts the cell by the sum over them of
    # (new - old value) x i's stride there (0 where i lacks the column)
    strides = marginals.column_strides(overlapping, cols)  # (marginals, len(cols))
    before = marginals.flat_cells(old, overlapping, local)  # (marginals, records)
    base = before - sum(strides[:, j, None] * old[:, c].astype(before.dtype) for j, c in enumerate(cols))
    shift = sum(strides[:, j, None] * v.astype(before.dtype) for j, v in enumerate(values))  # (marginals, cells)
    waiting = np.ones(removed.size, dtype=bool)
    step = min(removed.size, max(1, block // max(overlapping.size * offered.shape[1], 1)))  # records per block
    scratch = _Scratch(overlapping.size * step * offered.shape[1], before.dtype)
    moved = 0
    for _ in range(passes):  # passes over the assignment, not over records
        rows = np.flatnonzero(waiting)
        cand = offered[rows]
        excess = marginals.count_flat[where] - marginals.target_flat[where]
        leave = np.abs(excess - 1) - np.abs(excess)  # L1 change of a cell losing a record
        above, distance = np.abs(excess + 1), np.abs(excess)  # its L1 after gaining one, and now
        marginals.work.scored += overlapping.size
        delta = np.empty(cand.shape)
        for lo in range(0, rows.size, step):
            r, c = rows[lo: lo + step], cand[lo: lo + step]
            pa, change, other, moves = scratch.views((overlapping.size, *c.shape))
            np.take(shift, c, axis=1, out=pa, mode="clip")  # the offered cells' positions, (marginals, records, cand.)
            pa += base[:, r, None]
            pb = before[:, r, None]
            np.take(above, pa, out=change, mode="clip")  # the L1 change of each move, per marginal
            change += leave[pb]
            change -= np.take(distance, pa, out=other, mode="clip")
            np.sum(change, axis=0, where=np.not_equal(pa, pb, out=moves), out=delta[lo: lo + step])
        delta[left[cand] <= 0] = np.inf
        pick = np.argmin(delta, axis=1)
        best, change = cand[np.arange(rows.size), pick], delta[np.arange(rows.size), pick]
        want = np.flatnonzero(change < 0)
        waiting[rows[change >= 0]] = False  # no improving move on offer: the record stays as it is
        if want.size == 0:
            break
        want = want[np.lexsort((change[want], best[want]))]  # by cell, best move first
        won = want[np.r_[True, best[want][1:] != best[want][:-1]]]  # one record per cell and pass
        from_old = old[rows[won]]
        new = from_old.copy()
        for col, v in zip(cols, values):
            new[:, col] = v[best[won]]
        records[removed[rows[won]]] = new
        marginals.replace_rows(from_old, new)
        waiting[rows[won]] = False
        moved += won.size
        left -= np.bincount(best[won], minlength=cells.size)
        if not waiting.any() or left.sum() == 0:
            break
    return moved


class _Scratch:
    """Buffers for blocks of (marginals, records, candidates) values, allocated once per call (large
    temporaries cost page faults every time)."""

    def __init__(self, size: int, index_dtype: np.dtype) -> None:
        self.arrays = (np.empty(size, dtype=index_dtype), np.empty(size), np.empty(size), np.empty(size, dtype=bool))

    def views(self, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        size = int(np.prod(shape))
        return tuple(a[:size].reshape(shape) for a in self.arrays)
