"""GUM sharded over Spark partitions, with periodic global reconciliation.

``n`` synthetic records are split into ``P`` shards (about ``shard_size`` records each), one Spark
partition each. Only marginal counts travel to the driver, summed by a tree aggregation; the driver
broadcasts the global deficit ``target - current`` and the shards steer the union toward the global
targets through it (:mod:`privsyn_spark.synthesize.sharded.reconcile`), in two kinds of rounds:

- **Jacobi rounds** (``max_rounds``, the first one from the 1-way initialisation, or from samples of the
  fitted graphical model when one is given, toward the targets scaled to the shard): one
  ``mapInArrow`` in which every shard runs ``k`` local GUM iterations
  (:mod:`privsyn_spark.synthesize.gum.kernel`) toward its own counts plus its share of the deficit (an integer
  split of every cell across shards, proportional to shard size), so the union converges to the global
  targets rather than each shard to a noisy copy. They leave about ``P`` times GUM's absolute error floor.
- **Gauss-Seidel sweeps** (``sweeps``, optional): in each, every shard in turn (one round per shard, the
  others passing their state through) takes the *whole* deficit for a few iterations, kept only if the
  union's error does not grow, which brings the union down to a single shard's error floor (the parity
  that matters for small ``n``; each sweep costs ``P`` rounds, and its iterations add to every shard's).

Rounds stop on a tolerance or after the last one; appended attributes (attribute appending) are attached
at the end, with the union's conditional counts split exactly over the shards (the driver collects each
shard's counts of the append cores for it).

Every random draw of a shard derives from ``(seed, shard id, round)`` (``np.random.SeedSequence`` spawn
keys), so a recomputed task, or the same run on another number of executors or Spark partitions with the
same shard count, yields the identical table; every step's cost is linear in the shard's records. The
shard count is ``ceil(n / shard_size)``, raised to the session's default parallelism while every shard
keeps ``min_shard_size`` records (:func:`shard_count`), so every core works: with at least
``2 x min_shard_size`` records, the table then depends on the session's core count too.

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
from math import ceil

import numpy as np

from privsyn_spark.count_layout import CountLayout
from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.kernel import (
    AppendGroup,
    GumConfig,
    GumPlan,
    Key,
    append_attributes,
    initialize_records,
    plan_gum,
    prepare_targets,
    run_gum,
)
from privsyn_spark.synthesize.sharded.reconcile import (  # noqa: F401  (deficit_share: re-exported)
    GroupSplit,
    Step,
    append_split,
    core_cells,
    core_counts,
    deficit_share,
    layout_counts,
    schedule,
    tracked_mask,
    whole_deficit_turn,
)

log = logging.getLogger(__name__)

_INIT, _ROUND, _SPLIT, _APPEND, _TURN, _APPEND_SPLIT = 0, 1, 2, 3, 4, 5  # spawn-key tags of random streams


MIN_SHARD_SIZE = 100_000
"""Smallest shard made to use more cores: below it the P single-shard error floors of the Jacobi rounds
(an absolute L1 each) start to matter (the Adult sample, 48,842 records, stays one shard)."""


@dataclass(frozen=True)
class ShardedGumConfig:
    """Settings of sharded GUM."""

    gum: GumConfig = field(default_factory=GumConfig)
    """The per-shard kernel's settings (``gum.iterations`` is not used: every shard runs ``max_rounds x
    iterations_per_round + sweeps x sweep_iterations`` local iterations)."""
    shard_size: int = 1_000_000
    """Target records per shard; ``P = ceil(n / shard_size)`` shards of near-equal size, more when the
    Spark session has more cores and every shard keeps ``min_shard_size`` records (:func:`shard_count`)."""
    min_shard_size: int = MIN_SHARD_SIZE
    """Smallest shard the driver makes to give every core of the session (its default parallelism) one."""
    iterations_per_round: int = 10
    """Local GUM iterations (k) between two reconciliations."""
    model_iterations_per_round: int | None = 5
    """k (at most ``iterations_per_round``; None: ``iterations_per_round``) when the shards start from
    samples of the fitted model: their polishing gains most in its first iterations. On the 662,000 x 97
    table (2 shards) 3 rounds of 5 end at worst L1/n 0.0027 in 22 s CPU, 3 rounds of 10 at 0.0024 in 35 s."""
    max_rounds: int = 8
    """Jacobi rounds (the first one starts from the 1-way initialisation); sweeps come after them."""
    model_max_rounds: int | None = None
    """Jacobi rounds (at most ``max_rounds``; None: ``max_rounds``) when the shards start from samples of
    the fitted model; ``model_min_gain`` usually stops them first."""
    model_min_gain: float = 0.1
    """With a model start, stop the rounds (and sweeps) once a round lowers the worst union L1/n by less
    than this share of its value (0: never). The Adult sample, a generated 20-column table and the
    662,000 x 97 one (1 or 2 shards) then stop after 2-3 rounds; on the last, 2 more rounds of 10
    iterations (5% stop) lowered the worst L1/n 0.00242 -> 0.00223 at about 1.5x the time."""
    tolerance: float = 0.0
    """Stop when every tracked target's union L1 / n is at or below this (0: run every round)."""
    sweeps: int = 0
    """Gauss-Seidel sweeps after the Jacobi rounds (``P`` rounds each: every shard in turn takes the whole
    deficit). They remove the ``P`` single-shard error floors that Jacobi rounds leave in the union; worth
    it when those matter (small ``n``, few shards), 0 to skip. On the Adult sample, 10 sweeps after 4
    Jacobi rounds of 10 iterations, with ``gum.best_cell_pairs`` on in the rounds too, bring 4 shards to
    the error of 1 shard, exact or noisy targets (``tests/synthesize/test_sharded.py``)."""
    sweep_iterations: int = 3
    """Local iterations of a shard in its turn of a sweep."""
    settle_iterations: int = 2
    """The last of a turn's iterations that are improving-only (the others are plain GUM iterations, which
    can leave a local minimum)."""
    settle_sweeps: int = 3
    """Final sweeps whose turns are improving-only throughout."""
    sweep_best_cell_pairs: int = 400_000
    """``GumConfig.best_cell_pairs`` in the turns of a sweep (the Jacobi rounds use ``gum``'s own): in
    improving-only updates, removed records go to their best gain cell, which sweeps need to get down to
    a single shard's error floor."""

    def __post_init__(self) -> None:
        rounds = self.max_rounds if self.model_max_rounds is None else self.model_max_rounds
        k = self.iterations_per_round if self.model_iterations_per_round is None else self.model_iterations_per_round
        if min(self.shard_size, self.min_shard_size, self.iterations_per_round, self.max_rounds, rounds, k) < 1:
            raise ValueError("ShardedGumConfig: shard_size, min_shard_size, iterations_per_round, max_rounds, "
                             "model_max_rounds and model_iterations_per_round must be >= 1")
        if not 0 <= self.model_min_gain < 1:
            raise ValueError("ShardedGumConfig: model_min_gain must be in [0, 1)")
        if self.sweeps < 0 or self.sweep_iterations < 1 or self.settle_sweeps < 0 or self.sweep_best_cell_pairs < 0:
            raise ValueError("ShardedGumConfig: need sweeps >= 0, sweep_iterations >= 1, settle_sweeps >= 0 and "
                             "sweep_best_cell_pairs >= 0")
        if not 0 <= self.settle_iterations <= self.sweep_iterations:
            raise ValueError("ShardedGumConfig: need 0 <= settle_iterations <= sweep_iterations")

    def steps(self, shards: int) -> list[Step]:
        """The rounds after round 0 for ``shards`` shards (:func:`~.reconcile.schedule`)."""
        return schedule(shards, self.iterations_per_round, self.max_rounds, self.sweeps, self.sweep_iterations,
                        self.settle_iterations, self.settle_sweeps)


def shard_count(n: int, shard_size: int, parallelism: int = 1, min_shard_size: int = MIN_SHARD_SIZE) -> int:
    """Shards for ``n`` records: ``ceil(n / shard_size)``, raised to ``parallelism`` (the session's default
    parallelism: one shard per core) as far as every shard keeps at least ``min_shard_size`` records."""
    return max(1, ceil(n / shard_size), min(parallelism, n // max(min_shard_size, 1)))


def shard_sizes(n: int, shard_size: int, parallelism: int = 1, min_shard_size: int = MIN_SHARD_SIZE) -> list[int]:
    """Near-equal shard sizes summing to ``n``, :func:`shard_count` of them."""
    p = shard_count(n, shard_size, parallelism, min_shard_size)
    return [n // p + (1 if j < n % p else 0) for j in range(p)]


def shard_rng(seed: int, tag: int, shard: int, round_: int) -> np.random.Generator:
    """The random stream of one shard at one stage: a function of (seed, stage, shard id, round) only."""
    from privsyn_spark.randomness import generator

    return generator(seed, tag, shard, round_)


# ------------------------------------------------------------------------------ shard functions (numpy)


@dataclass(frozen=True)
class ShardContext:
    """Everything a shard task needs (broadcast once per run)."""

    plan: GumPlan
    layout: CountLayout
    targets: np.ndarray
    """Global target tables scaled to n, packed with ``layout``."""
    sizes: tuple[int, ...]
    seed: int
    config: ShardedGumConfig
    model: object = None
    """The fitted graphical model the shards start from (records sampled from it), or None: 1-way starts."""

    @property
    def tracked(self) -> tuple[Key, ...]:
        return self.plan.tracked_targets

    @property
    def gum(self) -> GumConfig:
        """The kernel's settings inside a round (errors are tracked globally, not per shard)."""
        gum = replace(self.config.gum, track_errors=False)
        return gum if self.model is None else gum.for_model_start()


def init_shard(ctx: ShardContext, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Round 0 of a shard: 1-way (or model-sampled) start, then k iterations toward the targets scaled to it."""
    n = ctx.sizes[shard]
    total = float(sum(ctx.sizes))
    tables = {k: v * (n / total) for k, v in ctx.layout.unpack(ctx.targets).items()}
    rng = shard_rng(ctx.seed, _INIT, shard, 0)
    records = initialize_records(ctx.plan, tables, n, rng, model=ctx.model)
    k = ctx.config.iterations_per_round
    run_gum(records, ctx.plan, tables, ctx.gum, rng, start_iteration=0, iterations=k)
    return records, layout_counts(ctx.layout, records)


def round_shard(ctx: ShardContext, shard: int, round_: int, records: np.ndarray, counts: np.ndarray,
                deficit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One round of a shard: local target = own counts + share of the deficit, then k iterations."""
    split = shard_rng(ctx.seed, _SPLIT, 0, round_)  # the same draws in every shard
    u, holder = split.random(deficit.size), split.integers(0, len(ctx.sizes), deficit.size)
    local = np.maximum(counts + deficit_share(deficit, ctx.sizes, shard, u, holder), 0.0)
    tables = ctx.layout.unpack(local)
    k = ctx.config.iterations_per_round
    rng = shard_rng(ctx.seed, _ROUND, shard, round_)
    run_gum(records, ctx.plan, tables, ctx.gum, rng, start_iteration=round_ * k, iterations=k)
    return records, layout_counts(ctx.layout, records)


def turn_shard(ctx: ShardContext, shard: int, step: Step, records: np.ndarray, counts: np.ndarray,
               deficit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A shard's Gauss-Seidel turn: the whole deficit, kept only if the union's error does not grow."""
    rng = shard_rng(ctx.seed, _TURN, shard, step.round)
    gum = replace(ctx.gum, best_cell_pairs=ctx.config.sweep_best_cell_pairs)
    return whole_deficit_turn(records, counts, deficit, ctx.plan, ctx.layout, gum, rng, step,
                              tracked_mask(ctx.layout, ctx.tracked))


def split_appended(ctx: ShardContext, cores: Sequence[np.ndarray]) -> dict[AppendGroup, GroupSplit]:
    """The driver's exact split of appended counts, from every shard's counts at the append cores."""
    have = core_counts(ctx.plan, ctx.layout, ctx.sizes, cores)
    return append_split(ctx.plan, ctx.layout.unpack(ctx.targets), have, shard_rng(ctx.seed, _APPEND_SPLIT, 0, 0))


def append_shard(ctx: ShardContext, shard: int, records: np.ndarray,
                 split: Mapping[AppendGroup, GroupSplit]) -> tuple[np.ndarray, np.ndarray]:
    """Attach a shard's appended attributes: its part of the exact split of the union's counts."""
    append_attributes(records, ctx.plan, ctx.layout.unpack(ctx.targets), shard_rng(ctx.seed, _APPEND, shard, 0),
                      counts_for=lambda g, cond, have: split[g].counts(cond, have, shard))
    return records, layout_counts(ctx.layout, records)


def make_context(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                 config: ShardedGumConfig, model=None, parallelism: int = 1) -> ShardContext:
    """Plan the run: GUM plan, packed global targets scaled to ``n``, shard sizes (``model``: see ShardContext).

    With a model, the context's config runs ``min(max_rounds, model_max_rounds)`` Jacobi rounds of
    ``min(iterations_per_round, model_iterations_per_round)`` iterations.
    ``parallelism``: the Spark session's default parallelism (:func:`shard_count`).
    """
    if model is not None and config.model_max_rounds is not None:
        config = replace(config, max_rounds=min(config.max_rounds, config.model_max_rounds))
    if model is not None and config.model_iterations_per_round is not None:
        config = replace(config, iterations_per_round=min(config.iterations_per_round,
                                                          config.model_iterations_per_round))
    plan = plan_gum(domain, targets.keys(), config.gum)
    tables = prepare_targets(plan, targets, n)
    layout = CountLayout(domain, list(plan.required_tables) + list(plan.targets))
    sizes = shard_sizes(n, config.shard_size, parallelism, config.min_shard_size)
    return ShardContext(plan, layout, layout.pack(tables), tuple(sizes), int(seed), config, model)


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
        config = self.context.config
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
                       config: ShardedGumConfig | None = None, model=None) -> tuple[np.ndarray, ShardedRun]:
    """The sharded algorithm in one process, no Spark: ``(records of all shards stacked, run)``.

    Same shard functions and random streams as the Spark driver's ``synthesize_sharded``, hence the same table.
    """
    config = config or ShardedGumConfig()
    ctx = make_context(domain, targets, n, seed, config, model)
    run = ShardedRun(ctx)
    started = time.perf_counter()
    state = [init_shard(ctx, j) for j in range(len(ctx.sizes))]
    done = run._record(_summed_counts(state), started)
    for step in ctx.config.steps(len(ctx.sizes)):
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
    split = split_appended(ctx, [c[core_cells(ctx.plan, ctx.layout)] for _, c in state])
    state = [append_shard(ctx, j, rec, split) for j, (rec, _) in enumerate(state)]
    run.final_errors = union_errors(ctx, _summed_counts(state), ctx.plan.targets)
    return np.concatenate([rec for rec, _ in state]), run

