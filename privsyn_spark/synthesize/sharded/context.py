"""Sharded GUM's settings and run context: :class:`ShardedGumConfig`, the shard count and sizes, and the
:class:`ShardContext` every shard task gets (broadcast once per run), planned by :func:`make_context`.

The round steps that use them are in :mod:`~privsyn_spark.synthesize.sharded.algorithm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from math import ceil

import numpy as np

from privsyn_spark.count_layout import CountLayout
from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.kernel import GumConfig, GumPlan, Key, plan_gum, prepare_targets
from privsyn_spark.synthesize.sharded.reconcile import Step, schedule

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
