"""The count tables GUM maintains while records change, with the index of which marginals a change touches.

Part of PrivSyn's GUM (Section 5.3). A GUM move rewrites some columns of some records: a Replace the
updated marginal's attributes, a Duplicate the columns it copies. Only the marginals that share a column
with those need rescoring and recounting, so :class:`MarginalSet` keeps, per column, the marginals over
it (the overlap index) and does every batch of work over just the touched marginals, in one vectorised
pass (all tables live in one flat vector, cell indices of several marginals are computed at once). The
work is counted (:attr:`MarginalSet.work`): one iteration costs ``O(records moved x marginals touched)``
on top of the ``O(n)`` grouping of the records by the updated marginal's cells, not
``O(moved x marginals^2)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from privsyn_spark.domain import Domain, Key


def cell_index(records: np.ndarray, cols: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Flat (C-order, as ``np.ravel_multi_index``) cell index of every record in a marginal over ``cols``.

    The smallest of uint16, int32 and int64 that holds every cell (each partial index is below the cells
    of the axes so far, so it never overflows on the way).
    """
    cells = prod(shape)
    dtype = np.uint16 if cells <= 1 << 16 else np.int32 if cells < 2**31 else np.int64
    idx = records[:, cols[0]].astype(dtype)
    for c, size in zip(cols[1:], shape[1:]):
        idx *= size
        np.add(idx, records[:, c], out=idx, casting="unsafe")  # codes of any integer dtype; the sum fits
    return idx


@dataclass
class WorkCounter:
    """How many marginal tables were scored and recounted (each counted once per batch of records)."""

    scored: int = 0
    """Marginal tables read to score or judge a batch of records."""
    recounted: int = 0
    """Marginal tables whose counts were updated for a batch of changed records."""


class MarginalSet:
    """Count tables of the records over a set of marginals, kept exact while records change.

    Counts are int64, targets float64, all tables packed in one flat vector each (C order over the
    canonical axes of every table; ``counts[i]`` and ``targets[i]`` are views). After each change only
    the changed rows are re-counted, and only in the marginals over a changed column.
    """

    def __init__(self, records: np.ndarray, domain: Domain, keys: Iterable[Key],
                 tables: Mapping[Key, np.ndarray]) -> None:
        self.keys = tuple(keys)
        self.cols = [tuple(domain.attrs.index(a) for a in k) for k in self.keys]
        self.shapes = [domain.shape(k) for k in self.keys]
        sizes = [prod(s) for s in self.shapes]
        self.offsets = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64).reshape(-1)
        self.target_flat = np.concatenate([np.asarray(tables[k], dtype=np.float64).ravel() for k in self.keys]
                                          or [np.zeros(0)])
        self.scale = np.sqrt(self.target_flat + 1.0)
        self.count_flat = np.zeros(self.target_flat.size, dtype=np.int64)
        self.targets = [self.target_flat[o: o + s] for o, s in zip(self.offsets, sizes)]
        self.counts = [self.count_flat[o: o + s] for o, s in zip(self.offsets, sizes)]
        for c, s, counts in zip(self.cols, self.shapes, self.counts):
            counts[:] = np.bincount(cell_index(records, c, s), minlength=counts.size)
        # overlap index: the marginals over each column, and the padded strides of every marginal
        self.by_column = [np.array([i for i, c in enumerate(self.cols) if j in c], dtype=np.int64)
                          for j in range(len(domain))]
        width = max((len(c) for c in self.cols), default=1)
        self._cols = np.zeros((len(self.keys), width), dtype=np.int64)
        self._strides = np.zeros((len(self.keys), width), dtype=np.int64)
        for i, (c, s) in enumerate(zip(self.cols, self.shapes)):
            self._cols[i, : len(c)] = c
            self._strides[i, : len(c)] = [prod(s[j + 1:]) for j in range(len(s))]
        self.work = WorkCounter()
        self._neighbourhood: dict[int, list[int]] = {}

    def position(self, key: Key) -> int:
        """Index of ``key`` in this set."""
        return self.keys.index(key)

    def l1(self) -> dict[Key, float]:
        """Current L1 distance to every target."""
        return {k: float(np.abs(c - t).sum()) for k, c, t in zip(self.keys, self.counts, self.targets)}

    def touching(self, columns: Iterable[int]) -> np.ndarray:
        """Indices (sorted) of the marginals over at least one of ``columns``: those a change there touches."""
        parts = [self.by_column[j] for j in columns]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def overlapping(self, i: int) -> np.ndarray:
        """Indices of the marginals sharing an attribute with marginal ``i`` (``i`` itself excluded)."""
        touched = self.touching(self.cols[i])
        return touched[touched != i]

    def duplicate_columns(self, i: int, whole_record_marginals: int,
                          component: Sequence[int] | None) -> list[int] | None:
        """Columns a Duplicate toward marginal ``i`` copies (None: whole records).

        With at most ``whole_record_marginals`` marginals in the set, the ``component``'s columns (the
        paper's Duplicate); beyond, the neighbourhood of ``i``: its attributes and those of every marginal
        sharing one with it, so every marginal overlapping ``i`` gets the source record's cell.
        """
        if len(self.keys) <= whole_record_marginals:
            return None if component is None else list(component)
        if i not in self._neighbourhood:
            self._neighbourhood[i] = sorted({c for j in self.touching(self.cols[i]) for c in self.cols[j]})
        return self._neighbourhood[i]

    def flat_cells(self, rows: np.ndarray, which: Sequence[int] | np.ndarray,
                   offsets: np.ndarray | None = None) -> np.ndarray:
        """``(len(which), len(rows))`` positions in the flat tables of every row's cell in each marginal.

        ``offsets`` (one per marginal of ``which``) replace the marginals' offsets in the flat tables.
        """
        which = np.asarray(which, dtype=np.int64)
        dtype = np.int32 if self.count_flat.size < 2**31 else np.int64
        by_column = np.asfortranarray(rows).T  # (d, rows), C order: one contiguous gather per marginal
        cols, strides = self._cols[which], self._strides[which].astype(dtype)  # padding: stride 0
        out = np.multiply(by_column[cols[:, 0]], strides[:, 0, None], dtype=dtype)
        out += (self.offsets[which] if offsets is None else offsets).astype(dtype)[:, None]
        for j in range(1, cols.shape[1]):
            stride = strides[:, j]
            if not stride.any():
                break
            if (stride == 1).all():  # every marginal's last axis (2-way marginals): no multiply
                out += by_column[cols[:, j]]
            else:
                out += np.multiply(by_column[cols[:, j]], stride[:, None], dtype=dtype)
        return out

    def column_strides(self, which: Sequence[int] | np.ndarray, cols: Sequence[int]) -> np.ndarray:
        """``(len(which), len(cols))`` stride of each column in the flat cells of each marginal (0: not over it)."""
        which = np.asarray(which, dtype=np.int64)
        dtype = np.int32 if self.count_flat.size < 2**31 else np.int64
        return np.stack([np.where(self._cols[which] == c, self._strides[which], 0).sum(axis=1) for c in cols],
                        axis=1).astype(dtype).reshape(which.size, len(cols))

    def gather(self, records: np.ndarray, rows: np.ndarray, which: Sequence[int] | np.ndarray) -> np.ndarray:
        """``records[rows]`` over the columns of marginals ``which`` only (the others 0), in Fortran order.

        Column by column: on the Fortran-order records a row gather reads every column of every row (97
        columns at width, most of them not needed), the slow part of scoring a candidate pool.
        """
        out = np.zeros((rows.size, records.shape[1]), dtype=records.dtype, order="F")
        for c in np.unique(self._cols[np.asarray(which, dtype=np.int64)]):  # padding adds column 0: harmless
            np.take(records[:, c], rows, out=out[:, c])
        return out

    def compact(self, which: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tables of marginals ``which`` laid out one after the other: ``(offsets, positions)``.

        ``offsets`` (one per marginal) start each table in the compact layout (pass them to
        :meth:`flat_cells`); ``positions`` are the flat-table positions of the compact layout's cells.
        """
        sizes = self.sizes[np.asarray(which, dtype=np.int64)]
        local = np.cumsum(sizes) - sizes
        return local, np.repeat(self.offsets[which] - local, sizes) + np.arange(int(sizes.sum()))

    def excess_score(self, rows: np.ndarray, which: Sequence[int] | np.ndarray) -> np.ndarray:
        """Per row, the sum over marginals ``which`` of (count - target) / sqrt(target + 1) at its cells."""
        self.work.scored += len(which)
        if len(which) == 0:
            return np.zeros(rows.shape[0])
        local, where = self.compact(which)
        excess = (self.count_flat[where] - self.target_flat[where]) / self.scale[where]
        out = np.empty(rows.shape[0])
        step = max(256, (1 << 16) // len(which))  # blocks of rows x marginals that stay in cache
        for lo in range(0, rows.shape[0], step):
            out[lo: lo + step] = np.take(excess, self.flat_cells(rows[lo: lo + step], which, local)).sum(axis=0)
        return out

    def l1_change(self, old: np.ndarray, new: np.ndarray, which: Sequence[int] | np.ndarray) -> np.ndarray:
        """Per row, the change of the summed L1 over marginals ``which`` if that row alone went ``old`` -> ``new``."""
        self.work.scored += len(which)
        if len(which) == 0:
            return np.zeros(old.shape[0])
        po, pn = self.flat_cells(old, which), self.flat_cells(new, which)
        eo = np.take(self.count_flat, po) - np.take(self.target_flat, po)
        en = np.take(self.count_flat, pn) - np.take(self.target_flat, pn)
        step = np.abs(eo - 1) - np.abs(eo) + np.abs(en + 1) - np.abs(en)
        return np.where(po != pn, step, 0.0).sum(axis=0)

    def replace_rows(self, old: np.ndarray, new: np.ndarray) -> None:
        """Account for rows changing from ``old`` to ``new`` (both ``(k, d)``), in the marginals over changed columns.

        Cost: ``O(rows x marginals touched + their cells)``.
        """
        if old.shape[0] == 0:
            return
        changed = np.flatnonzero((old != new).any(axis=0))
        which = self.touching(changed.tolist())
        self.work.recounted += which.size
        if which.size == 0:
            return
        if 8 * old.shape[0] * which.size < self.sizes[which].sum():  # few rows, big tables: only their cells
            np.add.at(self.count_flat, self.flat_cells(new, which).ravel(), 1)
            np.subtract.at(self.count_flat, self.flat_cells(old, which).ravel(), 1)
            return
        # count in a compact layout of the touched tables only (cost linear in their cells, not all cells)
        local, where = self.compact(which)
        change = (np.bincount(self.flat_cells(new, which, local).ravel(), minlength=where.size)
                  - np.bincount(self.flat_cells(old, which, local).ravel(), minlength=where.size))
        self.count_flat[where] += change
