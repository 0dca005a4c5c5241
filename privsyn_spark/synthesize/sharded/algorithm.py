"""GUM sharded over Spark partitions, with periodic global reconciliation.

``n`` synthetic records are split into ``P`` shards (about ``shard_rows`` records each), one Spark
partition each. Only marginal counts travel to the driver, summed by a tree aggregation; the driver
broadcasts the global deficit ``target - current`` and the shards steer the union toward the global
targets through it (:mod:`privsyn_spark.synthesize.sharded.reconcile`), in two kinds of rounds:

- **Jacobi rounds** (``gum_rounds``, the first one from the 1-way initialisation, or from samples of the
  fitted graphical model when one is given, toward the targets scaled to the shard): one
  ``mapInArrow`` in which every shard runs ``k`` local GUM iterations
  (:mod:`privsyn_spark.synthesize.gum.kernel`) toward its own counts plus its share of the deficit (an integer
  split of every cell across shards, proportional to shard size), so the union converges to the global
  targets rather than each shard to a noisy copy. They leave about ``P`` times GUM's absolute error floor.
- **Gauss-Seidel sweeps** (``gum_sweeps``, optional): in each, every shard in turn (one round per shard, the
  others passing their state through) takes the *whole* deficit for a few iterations, kept only if the
  union's error does not grow, which brings the union down to a single shard's error floor (the parity
  that matters for small ``n``; each sweep costs ``P`` rounds, and its iterations add to every shard's).

Rounds stop on a tolerance or after the last one; appended attributes (attribute appending) are attached
at the end, in the pass that hands the records on, with the union's conditional counts split exactly over
the shards (the driver collects each shard's counts of the append cores for it, and knows the union's
final errors from them and the split: :func:`appended_errors`).

Every random draw of a shard derives from ``(seed, shard id, round)`` (``np.random.SeedSequence`` spawn
keys), so a recomputed task, or the same run on another number of executors or Spark partitions with the
same shard count, yields the identical table; every step's cost is linear in the shard's records. The
shard count is ``ceil(n / shard_rows)``, raised to the session's default parallelism while every shard
keeps ``min_shard_size`` records (:func:`~privsyn_spark.synthesize.sharded.context.shard_count`), so every
core works: with at least ``2 x min_shard_size`` records, the table then depends on the session's core
count too.

:func:`run_shards_locally` runs the same shard functions in one process without Spark (reference and
benchmark baseline); :func:`~privsyn_spark.synthesize.sharded.spark_driver.synthesize_sharded` runs them
over Spark (:mod:`~privsyn_spark.synthesize.sharded.spark_driver`: shard state in a checkpointed DataFrame, one
``mapInArrow`` per round).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.randomness import Stage, generator
from privsyn_spark.synthesize.gum.append import append_conditional
from privsyn_spark.synthesize.gum.kernel import (
    AppendGroup,
    GumConfig,
    Key,
    append_attributes,
    initialize_records,
    run_gum,
)
from privsyn_spark.synthesize.sharded.context import ShardContext, ShardingConfig, make_context
from privsyn_spark.synthesize.sharded.reconcile import (  # deficit_share: re-exported
    GroupSplit,
    Step,
    append_split,
    core_cells,
    core_counts,
    deficit_share,
    layout_counts,
    tracked_mask,
    whole_deficit_turn,
)

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------ shard functions (numpy)


def init_shard(ctx: ShardContext, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Round 0 of a shard: 1-way (or model-sampled) start, then k iterations toward the targets scaled to it."""
    n = ctx.sizes[shard]
    total = float(sum(ctx.sizes))
    tables = {k: v * (n / total) for k, v in ctx.layout.unpack(ctx.targets).items()}
    rng = generator(ctx.seed, Stage.GUM_INIT, shard, 0)
    records = initialize_records(ctx.structure, tables, n, rng, model=ctx.model)
    k = ctx.sharding.iterations_per_round
    run_gum(records, ctx.structure, tables, ctx.gum, rng, start_iteration=0, iterations=k)
    return records, layout_counts(ctx.layout, records)


def round_shard(ctx: ShardContext, shard: int, round_: int, records: np.ndarray, counts: np.ndarray,
                deficit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One round of a shard: local target = own counts + share of the deficit, then k iterations."""
    split = generator(ctx.seed, Stage.GUM_SPLIT, 0, round_)  # the same draws in every shard
    u, holder = split.random(deficit.size), split.integers(0, len(ctx.sizes), deficit.size)
    local = np.maximum(counts + deficit_share(deficit, ctx.sizes, shard, u, holder), 0.0)
    tables = ctx.layout.unpack(local)
    k = ctx.sharding.iterations_per_round
    rng = generator(ctx.seed, Stage.GUM_ROUND, shard, round_)
    run_gum(records, ctx.structure, tables, ctx.gum, rng, start_iteration=round_ * k, iterations=k)
    return records, layout_counts(ctx.layout, records)


def turn_shard(ctx: ShardContext, shard: int, step: Step, records: np.ndarray, counts: np.ndarray,
               deficit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A shard's Gauss-Seidel turn: the whole deficit, kept only if the union's error does not grow."""
    rng = generator(ctx.seed, Stage.GUM_TURN, shard, step.round)
    gum = replace(ctx.gum, best_cell_pairs=ctx.sharding.sweep_best_cell_pairs)
    return whole_deficit_turn(records, counts, deficit, ctx.structure, ctx.layout, gum, rng, step,
                              tracked_mask(ctx.layout, ctx.tracked))


def split_appended(ctx: ShardContext, cores: Sequence[np.ndarray]) -> dict[AppendGroup, GroupSplit]:
    """The driver's exact split of appended counts, from every shard's counts at the append cores."""
    have = core_counts(ctx.structure, ctx.layout, ctx.sizes, cores)
    return append_split(ctx.structure, ctx.layout.unpack(ctx.targets), have,
                        generator(ctx.seed, Stage.GUM_APPEND_SPLIT, 0, 0))


def append_shard(ctx: ShardContext, shard: int, records: np.ndarray,
                 split: Mapping[AppendGroup, GroupSplit]) -> np.ndarray:
    """Attach a shard's appended attributes (in place; returned): its part of the exact split of the union's counts."""
    rng = generator(ctx.seed, Stage.GUM_APPEND, shard, 0)
    append_attributes(records, ctx.structure, ctx.layout.unpack(ctx.targets), rng,
                      counts_for=lambda g, cond, have: split[g].counts(cond, have, shard))
    return records


def appended_errors(ctx: ShardContext, cores: Sequence[np.ndarray], split: Mapping[AppendGroup, GroupSplit],
                    counts: np.ndarray) -> dict[Key, float]:
    """Union L1 to every target once the shards have appended, without a pass over their records: from the
    union's ``counts`` before appending and the split. Appending writes only appended attributes, each in one
    marginal of several attributes (its group's) and perhaps a 1-way target, and the shards' parts of the split
    add up to the group marginal's union counts, which give both."""
    have = core_counts(ctx.structure, ctx.layout, ctx.sizes, cores)
    want, got = ctx.layout.unpack(ctx.targets), ctx.layout.unpack(counts.astype(np.float64))
    domain = ctx.structure.domain
    for comp in ctx.structure.components:
        for g in comp.appends:
            cond = append_conditional(want[g.marginal], g)
            union = sum(split[g].counts(cond, have[g][j], j) for j in range(len(ctx.sizes)))
            axes = [g.marginal.index(a) for a in (*g.core, *g.attrs)]
            table = np.transpose(np.reshape(union, domain.shape(g.core) + domain.shape(g.attrs)), np.argsort(axes))
            for key in ctx.structure.targets:
                if set(key) & set(g.attrs):  # the group's marginal, or a 1-way target within it
                    kept = [a for a in g.marginal if a in key]
                    summed = table.sum(axis=tuple(i for i, a in enumerate(g.marginal) if a not in key))
                    got[key] = np.transpose(summed, [kept.index(a) for a in key])
    return {k: float(np.abs(got[k] - want[k]).sum()) for k in ctx.structure.targets}


def union_errors(ctx: ShardContext, counts: np.ndarray, keys: Sequence[Key] | None = None) -> dict[Key, float]:
    """L1 distance of summed shard counts to the global targets."""
    got, want = ctx.layout.unpack(counts.astype(np.float64)), ctx.layout.unpack(ctx.targets)
    return {k: float(np.abs(got[k] - want[k]).sum()) for k in (ctx.tracked if keys is None else keys)}


@dataclass
class ShardedRun:
    """Bookkeeping common to both drivers."""

    context: ShardContext
    history: list[dict[Key, float]] = field(default_factory=list)
    """Union L1 to each tracked target after each round (round 0 included)."""
    round_seconds: list[float] = field(default_factory=list)
    final_errors: dict[Key, float] = field(default_factory=dict)
    """Union L1 of the finished table to every given target."""

    @property
    def rounds(self) -> int:
        return len(self.history)

    @property
    def n(self) -> int:
        return int(sum(self.context.sizes))

    def max_relative_error(self) -> float:
        """Largest final union L1 / n over the given targets."""
        return max(self.final_errors.values(), default=0.0) / max(self.n, 1)

    def _record(self, counts: np.ndarray, started: float) -> bool:
        errs = union_errors(self.context, counts)
        self.history.append(errs)
        self.round_seconds.append(time.perf_counter() - started)
        worst = max(errs.values(), default=0.0) / max(self.n, 1)
        log.info("sharded GUM round %d: worst union L1/n %.5f (%.1f s)", len(self.history) - 1, worst,
                 self.round_seconds[-1])
        config = self.context.sharding
        if self.context.model is not None and config.model_min_gain > 0 and len(self.history) >= 2:
            before = max(self.history[-2].values(), default=0.0) / max(self.n, 1)
            if before - worst < config.model_min_gain * before:
                log.info("sharded GUM: round %d gained under %.0f%%; stopping", len(self.history) - 1,
                         100 * config.model_min_gain)
                return True
        return worst <= config.tolerance


def _summed_counts(state: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The shards' count vectors summed (a new array; there is at least one shard)."""
    total = state[0][1].copy()
    for _, counts in state[1:]:
        total = total + counts
    return total


def run_shards_locally(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                       sharding: ShardingConfig = ShardingConfig(), gum: GumConfig = GumConfig(),
                       model: object = None) -> tuple[np.ndarray, ShardedRun]:
    """The sharded algorithm in one process, no Spark: ``(records of all shards stacked, run)``.

    Same shard functions and random streams as the Spark driver's ``synthesize_sharded``, hence the same table.
    """
    ctx = make_context(domain, targets, n, seed, sharding, gum, model)
    run = ShardedRun(ctx)
    started = time.perf_counter()
    state = [init_shard(ctx, j) for j in range(len(ctx.sizes))]
    done = run._record(_summed_counts(state), started)
    for step in ctx.sharding.steps(len(ctx.sizes)):
        if done:
            break
        started = time.perf_counter()
        deficit = ctx.targets - _summed_counts(state)
        if step.shard is None:
            state = [round_shard(ctx, j, step.round, rec, c.astype(np.float64), deficit)
                     for j, (rec, c) in enumerate(state)]
        else:
            rec, c = state[step.shard]
            state[step.shard] = turn_shard(ctx, step.shard, step, rec, c.astype(np.float64), deficit)
        done = run._record(_summed_counts(state), started)
    cores = [c[core_cells(ctx.structure, ctx.layout)] for _, c in state]
    split = split_appended(ctx, cores)
    run.final_errors = appended_errors(ctx, cores, split, _summed_counts(state))
    return np.concatenate([append_shard(ctx, j, rec, split) for j, (rec, _) in enumerate(state)]), run

