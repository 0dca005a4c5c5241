"""Reconciling GUM shards with the global targets: the deficit split, whole-deficit turns, appended counts.

Sharded GUM (:mod:`privsyn_spark.synthesize.sharded.algorithm`) steers the union of its shards toward the global
targets through the global deficit ``target - sum of shard counts``, which the driver broadcasts. This
module holds the three ways a shard uses it, as numpy functions of broadcast values only:

- **Jacobi rounds** (every shard at once): :func:`deficit_share` splits each cell's deficit across shards
  in integer parts proportional to shard size. Each shard then settles at GUM's error floor toward its own
  local target, and that floor is absolute (unit-level churn between overlapping marginals, about the same
  summed L1 for 12k records as for 48k), so P shards leave about P single-shard floors in the union. Near
  convergence the deficit is sparse +-1 units and a record move must fix several of them at once (its
  cells in every marginal), which a cell-by-cell split scatters over shards.
- **Gauss-Seidel turns** (one shard at a time): :func:`whole_deficit_turn` gives a single shard the whole
  deficit, so every unit a move can fix is in the same shard; a turn is a few free GUM iterations (to
  leave local minima) then improving-only ones, kept only if the union's error does not grow. Sweeps
  of turns over all shards bring the union to a single shard's error; :func:`schedule` lays out the rounds.
- **Appended attributes**: :func:`append_split` turns the union's conditional counts into an exact
  integer split over shards (each shard's floors plus a slice of the pooled remainders), so appending in
  shards adds no rounding error per shard to the union.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from privsyn_spark.measure.count_layout import CountLayout
from privsyn_spark.synthesize.gum.kernel import (
    AppendGroup,
    GumConfig,
    GumStructure,
    append_conditional,
    marginal_counts,
    run_gum,
)
from privsyn_spark.synthesize.gum.rounding import round_rows


def layout_counts(layout: CountLayout, records: np.ndarray) -> np.ndarray:
    """Flat int64 counts of ``records`` over every table of ``layout`` (what a shard sends to the driver)."""
    return layout.pack({k: marginal_counts(records, layout.domain, k) for k in layout.keys}, np.int64)

def deficit_share(deficit: np.ndarray, sizes: Sequence[int], shard: int, u: np.ndarray,
                  holder: np.ndarray) -> np.ndarray:
    """Shard ``shard``'s part of a flat deficit vector in a Jacobi round: integer parts proportional to size.

    Per cell, the integer part of the deficit is split by systematic rounding with the offset ``u``
    (the same draw in every shard), so the parts of all shards sum exactly to it; the fractional rest
    goes to shard ``holder``. Every shard computes its part alone from the broadcast deficit.
    """
    whole = np.trunc(deficit)
    magnitude = np.abs(whole)
    total = float(sum(sizes))
    before = float(sum(sizes[:shard]))
    low = np.floor(magnitude * (before / total) + u)
    high = np.floor(magnitude * ((before + sizes[shard]) / total) + u)
    share = (high - low) * np.sign(whole)
    return share + np.where(holder == shard, deficit - whole, 0.0)


# ----------------------------------------------------------------------------------- Gauss-Seidel turns


@dataclass(frozen=True)
class Step:
    """One round after round 0: a Jacobi round (``shard`` None) or one shard's Gauss-Seidel turn."""

    round: int
    shard: int | None
    start: int
    """Iteration number of the step's first local iteration (alpha's step decay)."""
    free: int
    """Local iterations: a Jacobi round's (the kernel's own schedule), a turn's plain ones (not improving-only)."""
    settle: int
    """A turn's improving-only iterations after the plain ones."""


def schedule(shards: int, iterations_per_round: int, gum_rounds: int, gum_sweeps: int, sweep_iterations: int,
             settle_iterations: int, settle_sweeps: int) -> list[Step]:
    """The rounds after round 0: ``gum_rounds - 1`` Jacobi rounds, then ``gum_sweeps`` sweeps of turns.

    A sweep gives every shard, in shard order, one turn of ``sweep_iterations`` local iterations, the last
    ``settle_iterations`` of them improving-only (all of them in the last ``settle_sweeps`` sweeps). Each
    shard's iteration numbers continue from the Jacobi rounds, so every shard runs ``gum_rounds * k +
    gum_sweeps * sweep_iterations`` local iterations whatever the number of shards.
    """
    k = iterations_per_round
    steps = [Step(r, None, r * k, k, 0) for r in range(1, gum_rounds)]
    for s in range(gum_sweeps):
        settle = sweep_iterations if s >= gum_sweeps - settle_sweeps else settle_iterations
        start = gum_rounds * k + s * sweep_iterations
        for shard in range(shards):
            steps.append(Step(len(steps) + 1, shard, start, sweep_iterations - settle, settle))
    return steps


def tracked_mask(layout: CountLayout, keys: Sequence[tuple[str, ...]]) -> np.ndarray:
    """Flat mask of the cells of ``keys`` in ``layout`` (the cells whose union L1 a turn must lower)."""
    mask = np.zeros(layout.size, dtype=bool)
    for k in keys:
        mask[layout.offsets[k]: layout.offsets[k] + layout.domain.cells(k)] = True
    return mask


def whole_deficit_turn(records: np.ndarray, counts: np.ndarray, deficit: np.ndarray, structure: GumStructure,
                       layout: CountLayout, config: GumConfig, rng: np.random.Generator, step: Step,
                       judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Gauss-Seidel turn of one shard: its local target is its own counts plus the whole deficit.

    Runs ``step.free`` plain iterations (not improving-only) then ``step.settle`` improving-only ones, in
    place on a copy; returns the new ``(records, counts)`` if the union's summed L1 over the ``judged``
    cells (the other shards unchanged) is not higher than before, else the shard's state unchanged. The
    target is clipped at 0 where the deficit asks for more removals than the shard has records.
    """
    tables = layout.unpack(np.maximum(counts + deficit, 0.0))
    work = records.copy(order="F")
    plain = replace(config, track_errors=False, improving_only_after=None)
    if step.free:
        run_gum(work, structure, tables, plain, rng, start_iteration=step.start, iterations=step.free)
    if step.settle:
        run_gum(work, structure, tables, replace(plain, improving_only_after=0), rng,
                start_iteration=step.start + step.free, iterations=step.settle)
    new = layout_counts(layout, work)
    before = np.abs(deficit[judged]).sum()
    after = np.abs(deficit[judged] - (new[judged] - counts[judged])).sum()
    return (work, new) if after <= before else (records, np.asarray(counts, dtype=np.int64))


# ------------------------------------------------------------------------------- appended attributes


@dataclass(frozen=True)
class GroupSplit:
    """The exact split of one append group's union counts over shards (computed by the driver)."""

    rest: np.ndarray
    """``(core cells, appended cells)`` pooled remainders: union counts minus every shard's floors."""
    order: np.ndarray
    """Per core cell, a random order of the appended cells in which shards take consecutive remainders."""
    offsets: np.ndarray
    """``(shards, core cells)``: where each shard's slice of the pooled remainders starts."""

    def counts(self, cond: np.ndarray, have: np.ndarray, shard: int) -> np.ndarray:
        """Shard ``shard``'s ``(core cells, appended cells)`` counts, rows summing to its ``have``."""
        floors = np.floor(cond * have[:, None])
        short = have - floors.sum(axis=1)
        lo = self.offsets[shard][:, None]
        cum = np.cumsum(np.take_along_axis(self.rest, self.order, axis=1), axis=1)
        taken = np.diff(np.clip(cum, lo, lo + short[:, None]), axis=1, prepend=lo)
        out = np.empty_like(taken)
        np.put_along_axis(out, self.order, taken, axis=1)
        return (floors + out).astype(np.int64)


def core_cells(structure: GumStructure, layout: CountLayout) -> np.ndarray:
    """Flat layout positions of every append group's core table (what the driver collects from each shard)."""
    spans = [np.arange(layout.offsets[g.core], layout.offsets[g.core] + layout.domain.cells(g.core))
             for comp in structure.components for g in comp.appends if g.core]
    return np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)


def core_counts(structure: GumStructure, layout: CountLayout, sizes: Sequence[int],
                cores: Sequence[np.ndarray]) -> dict[AppendGroup, np.ndarray]:
    """``(shards, core cells)`` records per core cell of every append group, from each shard's counts at
    :func:`core_cells` (an empty core has one cell: the shard's size)."""
    rows = np.stack([np.asarray(c, dtype=np.int64) for c in cores])
    have, pos = {}, 0
    for g in (g for comp in structure.components for g in comp.appends):
        if g.core:
            cells = layout.domain.cells(g.core)
            have[g], pos = rows[:, pos: pos + cells], pos + cells
        else:
            have[g] = np.asarray(sizes, dtype=np.int64)[:, None]
    return have


def append_split(structure: GumStructure, tables: Mapping[tuple[str, ...], np.ndarray],
                 have: Mapping[AppendGroup, np.ndarray], rng: np.random.Generator) -> dict[AppendGroup, GroupSplit]:
    """The driver's exact split of appended counts: shard ``j`` gets ``floor(cond * have_j)`` plus a slice.

    ``have[group]`` is the ``(shards, core cells)`` matrix of records per core cell in every shard. The
    union's counts are ``cond * H`` (``H`` the union's records per core cell) rounded with exact row
    totals: the shards' floors plus the pooled fractional remainders, rounded with exact totals
    (:func:`~privsyn_spark.synthesize.gum.rounding.round_rows`) and cut into consecutive slices (in a
    random order of appended cells) of each shard's shortfall.
    Costs shards x core cells x appended cells per group, on the driver, whatever the number of records.
    """
    out = {}
    for comp in structure.components:
        for g in comp.appends:
            cond = append_conditional(tables[g.marginal], g)
            h = np.asarray(have[g], dtype=np.int64)
            floors = np.floor(cond[None, :, :] * h[:, :, None])
            short = h - floors.sum(axis=2).astype(np.int64)           # (shards, core cells)
            want = np.clip(cond * h.sum(axis=0)[:, None] - floors.sum(axis=0), 0.0, None)
            out[g] = GroupSplit(round_rows(want, short.sum(axis=0), rng),
                                np.argsort(rng.random(cond.shape), axis=1),
                                (np.cumsum(short, axis=0) - short).astype(np.int64))
    return out
