"""GUM's record-level operations: the start records, counts kept exact as records change, one marginal's update.

Part of PrivSyn's GUM (Section 5.3): over-counted cells lose records, under-counted cells gain them by
Duplicate or Replace; everything vectorised (cell index, bincount, radix argsort, ``np.repeat``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.best_cell import best_cell_moves
from privsyn_spark.synthesize.gum.marginal_set import MarginalSet, cell_index
from privsyn_spark.synthesize.gum.rounding import round_total, stochastic_round
from privsyn_spark.synthesize.gum.structure import GumConfig, GumStructure, Key

log = logging.getLogger(__name__)

def codes_dtype(domain: Domain) -> np.dtype:
    """Smallest unsigned integer dtype holding every code of ``domain``."""
    biggest = max(domain.sizes, default=1)
    return np.dtype(np.uint8 if biggest <= 1 << 8 else np.uint16 if biggest <= 1 << 16 else np.int32)


def marginal_counts(records: np.ndarray, domain: Domain, key: Key) -> np.ndarray:
    """Count table (int64, axes in canonical order) of ``records`` over the attributes ``key``."""
    key = domain.canonical(key)
    shape = domain.shape(key)
    cols = tuple(domain.attrs.index(a) for a in key)
    return np.bincount(cell_index(records, cols, shape), minlength=prod(shape)).reshape(shape)


def stable_argsort(idx: np.ndarray, cells: int) -> np.ndarray:
    """Stable argsort of cell indices; LSD radix passes on 16-bit digits (deterministic on every CPU)."""
    if cells <= 1 << 16:
        return np.argsort(idx.astype(np.uint16, copy=False), kind="stable")
    if cells <= 1 << 32:
        order = np.argsort((idx & 0xFFFF).astype(np.uint16), kind="stable")
        high = (idx[order] >> 16).astype(np.uint16)
        return order[np.argsort(high, kind="stable")]
    return np.argsort(idx, kind="stable")


def _pick_in_groups(order: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """From each group ``order[start:start+size]`` take ``count`` records from a random cyclic offset.

    Positions are random (records are shuffled between passes), so a run from a random offset is a
    random subset; counts above the group size wrap around (repeats, only for duplicate sources).
    """
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=order.dtype)
    offsets = rng.integers(0, sizes)
    group = np.repeat(np.arange(counts.size), counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[starts[group] + (offsets[group] + within) % sizes[group]]


def _removal_amounts(excess: np.ndarray, current: np.ndarray, total: float) -> tuple[np.ndarray, float]:
    """Per-cell removals ``min(excess, beta * current)`` summing to ``total``; returns them and beta.

    PrivSyn Section 5.3: over-counted cells lose min(n_s - n_t, beta n_s), beta set by the additions.
    """
    over = np.flatnonzero(excess > 0)
    if total >= excess[over].sum():
        return excess.copy(), 1.0
    ratio = excess[over] / current[over]
    order = np.argsort(ratio, kind="stable")
    q, e, s = ratio[order], excess[over][order], current[over][order]
    done = np.concatenate(([0.0], np.cumsum(e)[:-1]))  # cells below position k are fully corrected
    rest = np.cumsum(s[::-1])[::-1]                      # sum of n_s at positions >= k
    k = min(int(np.searchsorted(done + q * rest, total)), q.size - 1)
    beta = (total - done[k]) / rest[k]
    out = np.zeros_like(excess)
    out[over] = np.minimum(excess[over], beta * current[over])
    return out, float(beta)


# ------------------------------------------------------------------------------------------- records


def redraw_ruled_out(records: np.ndarray, attrs: Sequence[str], tables: Mapping[Key, np.ndarray],
                     rng: np.random.Generator) -> np.ndarray:
    """``records`` (codes, one column per attribute of ``attrs``) with every code its target 1-way table in
    ``tables`` rules out (a zeroed or absent value: count <= 0) redrawn from that table's shares, in place.
    A model sampled as it is gives such codes a little mass (its fit to the noisy marginals)."""
    for j, a in enumerate(attrs):
        one_way = tables.get((a,))
        if one_way is None or one_way.sum() <= 0:
            continue
        ruled_out = one_way[records[:, j]] <= 0
        if ruled_out.any():
            records[ruled_out, j] = rng.choice(len(one_way), int(ruled_out.sum()), p=one_way / one_way.sum())
    return records


def initialize_records(structure: GumStructure, tables: Mapping[Key, np.ndarray], n: int,
                       rng: np.random.Generator, model: Any = None, chunk: int = 1 << 18) -> np.ndarray:
    """``(n, d)`` codes (Fortran order), shuffled: independent 1-way draws, or records sampled from ``model``.

    Without ``model``, every attribute follows its 1-way table exactly (PrivSyn's start). With a fitted
    graphical model (:class:`~privsyn_spark.estimate.model.GraphicalModel` over the structure's domain),
    records are drawn from it (exact tree sampling, ``chunk`` records at a time), already close to every
    target the model was fitted to; a sampled code the targets rule out (a zeroed or absent value) is
    redrawn from its attribute's target 1-way shares.
    """
    domain = structure.domain
    records = np.empty((n, len(domain)), dtype=codes_dtype(domain), order="F")
    if model is not None:
        if tuple(model.domain.attrs) != tuple(domain.attrs):
            raise ValueError("initialize_records: the model's domain is not the structure's")
        for lo in range(0, n, chunk):
            records[lo: lo + chunk] = model.sample(min(chunk, n - lo), rng)
        return redraw_ruled_out(records, domain.attrs, tables, rng)  # GUM never has to remove them
    for j, (a, size) in enumerate(zip(domain.attrs, domain.sizes)):
        one_way = tables.get((a,))
        if one_way is None:
            log.warning("attribute %r is in no target; its codes are uniform", a)
            records[:, j] = rng.integers(0, size, n)
            continue
        total = one_way.sum()
        p = one_way / total if total > 0 else np.full(size, 1.0 / size)
        counts = round_total(p * n, rng, n)
        records[:, j] = rng.permutation(np.repeat(np.arange(size), counts))
    return records


def _shuffle_columns(records: np.ndarray, cols: list[int], rng: np.random.Generator) -> None:
    """Shuffle the rows of the given columns in place (one permutation for all of them)."""
    perm = rng.permutation(records.shape[0])
    if not records.flags.f_contiguous:
        records[:, cols] = np.take(records[:, cols], perm, axis=0)
        return
    shuffled = np.empty(records.shape[0], dtype=records.dtype)
    for c in cols:  # column by column: contiguous in Fortran order
        records[:, c] = np.take(records[:, c], perm, out=shuffled)


@dataclass
class UpdateStats:
    """What one marginal update did."""

    l1_before: float
    changed: int
    duplicated: int
    beta: float


def _by_group_best_first(score: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Order of candidates by group, highest score first within a group, ties in their given order.

    The same order as ``np.lexsort((-score, group))``, by LSD radix passes on 16-bit digits (faster on
    candidate pools): the float64 ``-score`` mapped to integers in the same order (sign bit flipped
    for non-negatives, all bits for negatives; -0.0 as 0.0), then the groups (:func:`stable_argsort`).
    """
    bits = (0.0 - score).view(np.uint64)  # 0.0 - x: never -0.0
    negative = (bits >> np.uint64(63)).astype(bool)
    key = np.where(negative, ~bits, bits | np.uint64(1 << 63))
    order = np.arange(score.size)
    for shift in (0, 16, 32, 48):
        digit = ((key[order] >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order[stable_argsort(group[order], groups)]


def _choose(order: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray, pool: int,
            score: Any, rng: np.random.Generator) -> np.ndarray:
    """Pick ``counts[g]`` records of each cell group; with ``pool`` > 1, the best-scored of a random pool.

    The pool of a cell holds up to ``pool * count`` of its records (random, see :func:`_pick_in_groups`);
    records are ranked by ``score(rows)`` (higher first, ties in random order).
    """
    if pool <= 1 or counts.sum() == 0:
        return _pick_in_groups(order, starts, sizes, counts, rng)
    take = np.maximum(np.minimum(sizes, pool * counts), counts)
    cand = _pick_in_groups(order, starts, sizes, take, rng)
    group = np.repeat(np.arange(counts.size), take)
    ranked = _by_group_best_first(score(cand), group, counts.size)
    rank = np.arange(cand.size) - np.repeat(np.cumsum(take) - take, take)
    return cand[ranked][rank < np.repeat(counts, take)]


def update_marginal(records: np.ndarray, marginals: MarginalSet, which: int, alpha: float, config: GumConfig,
                    rng: np.random.Generator, copy_cols: list[int] | None = None,
                    scored: Iterable[int] | None = None, improving_only: bool = False) -> UpdateStats:
    """One GUM step toward marginal ``which`` of ``marginals`` (PrivSyn Section 5.3), in place.

    ``copy_cols`` are the component's columns (None: whole records); a Duplicate copies them, or only the
    neighbourhood of ``which`` (:attr:`GumConfig.whole_record_marginals`). Candidate records are ranked
    over ``scored`` (indices in ``marginals``; default: all) restricted to the marginals over a column a
    move may change (the overlap index): removals prefer records in over-counted cells of those
    marginals, duplicate sources records in under-counted ones. With ``improving_only``, a move is kept
    only if it lowers the summed L1 over ``which`` and the scored marginals it touches, and small updates
    send each removed record to its best gain cell (:attr:`GumConfig.best_cell_pairs`). The counts in
    ``marginals`` are kept up to date, recounting only the marginals over a changed column: the update
    costs ``O(n)`` to group the records by cell plus ``O(moved x marginals touched)``.
    """
    n = records.shape[0]
    cols, shape, target = marginals.cols[which], marginals.shapes[which], marginals.targets[which]
    cells = target.size
    current_i = marginals.counts[which]
    current = current_i.astype(np.float64)
    l1 = float(np.abs(current - target).sum())

    # gains: min(n_t - n_s, alpha n_s) for under-counted cells, alpha n_t for empty ones
    under = current < target
    live = under & (current > 0)
    empty = under & (current == 0)
    gain = np.zeros(cells)
    gain[live] = np.minimum(target[live] - current[live], alpha * current[live])
    gain[empty] = np.minimum(target[empty], alpha * target[empty])
    add = stochastic_round(gain, rng)
    total_add = int(add.sum())
    if total_add == 0:
        return UpdateStats(l1, 0, 0, 0.0)

    # losses: min(n_s - n_t, beta n_s), beta solved so that losses match gains
    loss, beta = _removal_amounts(np.where(current > target, current - target, 0.0), current, float(total_add))
    remove = np.minimum(round_total(loss, rng), current_i)
    dup = np.zeros(cells, dtype=np.int64)  # gains made by Duplicate; the rest by Replace
    dup[live] = rng.binomial(add[live], config.duplicate_share(l1 / max(n, 1)))
    rep = add - dup
    gain_cells = np.flatnonzero(add)
    offered = min(gain_cells.size, config.best_cell_candidates)
    best_cells = improving_only and 0 < int(remove.sum()) * offered <= config.best_cell_pairs
    if best_cells:  # polishing: removed records go to their best gain cells by Replace, no Duplicate
        dup[:] = 0

    # group the records of the cells that lose records or give duplicate sources by cell (the same order as
    # grouping all records: the sort is stable), pick removed records and duplicate sources
    idx = cell_index(records, cols, shape)
    held = np.where((remove > 0) | (dup > 0), current_i, 0)
    if 2 * held.sum() < n:
        picked = np.flatnonzero(np.take(held > 0, idx))
        order = np.take(picked, stable_argsort(np.take(idx, picked), cells))
    else:
        order = stable_argsort(idx, cells)
        held = current_i
    starts = np.cumsum(held) - held
    pool = config.pool(total_add, n)
    copied = marginals.duplicate_columns(which, config.whole_record_marginals, copy_cols)
    if dup.any():  # the marginals a move may touch: over the copied columns, else those overlapping ``which``
        others = marginals.touching(range(records.shape[1]) if copied is None else copied)
        others = others[others != which]
    else:
        others = marginals.overlapping(which)
    if scored is not None:
        others = np.intersect1d(others, np.fromiter(scored, dtype=np.int64))

    def score(rows: np.ndarray) -> np.ndarray:
        return marginals.excess_score(marginals.gather(records, rows, others), others)

    rc, dc = np.flatnonzero(remove), np.flatnonzero(dup)
    removed = _choose(order, starts[rc], current_i[rc], remove[rc], pool, score, rng)
    if best_cells:
        moved = best_cell_moves(records, removed, marginals, which, [which, *others.tolist()], gain_cells,
                                 add[gain_cells], config.best_cell_candidates, rng)
        return UpdateStats(l1, moved, 0, beta)
    sources = _choose(order, starts[dc], current_i[dc], dup[dc], pool, lambda rows: -score(rows), rng)
    rep_cells = np.repeat(np.arange(cells), rep)

    # pair removed records with gain slots at random (fewer removals than gains only by rounding)
    slots = rng.permutation(total_add)[: removed.size]
    is_dup = slots < sources.size
    old = records[removed]
    new = old.copy()
    d_rows = np.flatnonzero(is_dup)
    if copied is None or len(copied) == records.shape[1]:
        new[d_rows] = records[sources[slots[is_dup]]]
    else:
        copied_cols = np.asarray(copied, dtype=np.intp)
        new[np.ix_(d_rows, copied_cols)] = records[np.ix_(sources[slots[is_dup]], copied_cols)]
    r_rows = np.flatnonzero(~is_dup)
    values = np.unravel_index(rep_cells[slots[~is_dup] - sources.size], shape)
    for c, v in zip(cols, values):
        new[r_rows, c] = v
    if improving_only:  # keep the moves that lower the summed L1 (each judged alone)
        judged = marginals.touching(np.flatnonzero((old != new).any(axis=0)))
        if scored is not None:
            judged = np.intersect1d(judged, np.fromiter(scored, dtype=np.int64))
        judged = np.concatenate(([which], judged[judged != which]))  # ``which`` first: the sums' order
        keep = marginals.l1_change(old, new, judged) < 0
        removed, old, new, is_dup = removed[keep], old[keep], new[keep], is_dup[keep]
    records[removed] = new
    marginals.replace_rows(old, new)
    return UpdateStats(l1, int(removed.size), int(is_dup.sum()), beta)


def l1_errors(records: np.ndarray, domain: Domain, tables: Mapping[Key, np.ndarray],
              keys: Iterable[Key]) -> dict[Key, float]:
    """L1 distance between the records' counts and each table in ``keys``."""
    return {k: float(np.abs(marginal_counts(records, domain, k) - tables[k]).sum()) for k in keys}
