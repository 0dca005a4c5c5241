"""Sharded GUM's settings and run context: :class:`ShardingConfig`, the shard count and sizes, and the
:class:`ShardContext` every shard task gets (broadcast once per run), built by :func:`make_context`.

The round steps that use them are in :mod:`~privsyn_spark.synthesize.sharded.algorithm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from math import ceil

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.count_layout import CountLayout
from privsyn_spark.synthesize.gum.kernel import GumConfig, GumStructure, Key, gum_structure, prepare_targets
from privsyn_spark.synthesize.sharded.reconcile import Step, schedule

MIN_SHARD_SIZE = 100_000
"""Smallest shard made to use more cores: below it the P single-shard error floors of the Jacobi rounds
(an absolute L1 each) start to matter (the Adult sample, 48,842 records, stays one shard)."""


@dataclass(frozen=True)
class ShardingConfig:
    """How synthesis is spread over Spark: records per shard and the reconciliation schedule of sharded
    GUM (``Settings.sharding``; the YAML section ``sharding:``). Each field keeps its name from the CLI flag
    (``--shard-rows``, ``--gum-rounds``, ``--gum-sweeps``) to the kernel; the per-shard kernel's own
    settings are ``Settings.gum`` (:class:`~privsyn_spark.synthesize.gum.structure.GumConfig`; its
    ``iterations`` is not used: every shard runs ``gum_rounds x iterations_per_round + gum_sweeps x
    sweep_iterations`` local iterations)."""

    shard_rows: int = 1_000_000
    """Target records per shard (one Spark partition each); ``P = ceil(n / shard_rows)`` shards of near-equal
    size, more when the Spark session has more cores and every shard keeps ``min_shard_size`` records
    (:func:`shard_count`)."""
    gum_rounds: int = 8
    """Jacobi rounds (the first one starts from the 1-way initialisation); sweeps come after them."""
    gum_sweeps: int = 0
    """Gauss-Seidel sweeps after the Jacobi rounds (``P`` rounds each: every shard in turn takes the whole
    deficit). They remove the ``P`` single-shard error floors that Jacobi rounds leave in the union; worth
    it when those matter (small ``n``, few shards), 0 to skip. On the Adult sample, 10 sweeps after 4
    Jacobi rounds of 10 iterations, with ``gum.best_cell_pairs`` on in the rounds too, bring 4 shards to
    the error of 1 shard, exact or noisy targets (``tests/synthesize/sharded/test_sharded.py``)."""
    iterations_per_round: int = 10
    """Local GUM iterations (k) between two reconciliations."""
    model_iterations_per_round: int | None = 5
    """k (at most ``iterations_per_round``; None: ``iterations_per_round``) when the shards start from
    samples of the fitted model: their polishing gains most in its first iterations. On the 662,000 x 97
    table (2 shards) 3 rounds of 5 end at worst L1/n 0.0027 in 22 s CPU, 3 rounds of 10 at 0.0024 in 35 s."""
    model_max_rounds: int | None = None
    """Jacobi rounds (at most ``gum_rounds``; None: ``gum_rounds``) when the shards start from samples of
    the fitted model; ``model_min_gain`` usually stops them first."""
    model_min_gain: float = 0.05
    """With a model start, stop the rounds (and sweeps) once a round lowers the worst union L1/n by less
    than this share (5 %) of its value (0: never). The Adult sample, a generated 20-column table and the
    662,000 x 97 one (1 or 2 shards) then stop after 2-3 rounds."""
    tolerance: float = 0.0
    """Stop when every tracked target's union L1 / n is at or below this (0: run every round)."""
    model_tolerance: float = 1e-3
    """``tolerance`` (if larger) when the shards start from samples of the model. Below it a round moves the
    2-way TVD to the input far less than the noise does: on a generated 10^7 x 15 table (10 shards) rounds
    2-4 took the worst L1/n from 0.00041 to 0.00028 in 22 s and left the mean 2-way TVD to the input at
    0.0109 (paired, 2 seeds); at 10^8 rows they cost 137 s. Small tables stay above it (Adult: 0.003-0.006)."""
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
    min_shard_size: int = MIN_SHARD_SIZE
    """Smallest shard the driver makes to give every core of the session (its default parallelism) one."""

    def __post_init__(self) -> None:
        minimum = {"shard_rows": 1, "gum_rounds": 1, "gum_sweeps": 0, "iterations_per_round": 1,
                   "model_iterations_per_round": 1, "model_max_rounds": 1, "sweep_iterations": 1,
                   "settle_iterations": 0, "settle_sweeps": 0, "sweep_best_cell_pairs": 0, "min_shard_size": 1}
        for name, low in minimum.items():
            value = getattr(self, name)
            if value is not None and value < low:
                raise UsageError(f"{name} must be >= {low}, got {value}")
        if not 0 <= self.model_min_gain < 1:
            raise UsageError(f"model_min_gain must be in [0, 1), got {self.model_min_gain}")
        for name in ("tolerance", "model_tolerance"):
            if not getattr(self, name) >= 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.settle_iterations > self.sweep_iterations:
            raise UsageError(f"settle_iterations must be <= sweep_iterations ({self.sweep_iterations}), "
                             f"got {self.settle_iterations}")

    def for_model_start(self) -> ShardingConfig:
        """These settings when the shards start from samples of the model: ``model_max_rounds`` Jacobi rounds
        of ``model_iterations_per_round`` iterations (each at most its plain counterpart), stopping at
        ``model_tolerance`` (at least ``tolerance``)."""
        rounds, k = self.model_max_rounds, self.model_iterations_per_round
        return replace(self, gum_rounds=self.gum_rounds if rounds is None else min(self.gum_rounds, rounds),
                       iterations_per_round=self.iterations_per_round if k is None
                       else min(self.iterations_per_round, k), tolerance=max(self.tolerance, self.model_tolerance))

    def steps(self, shards: int) -> list[Step]:
        """The rounds after round 0 for ``shards`` shards (:func:`~.reconcile.schedule`)."""
        return schedule(shards, self.iterations_per_round, self.gum_rounds, self.gum_sweeps, self.sweep_iterations,
                        self.settle_iterations, self.settle_sweeps)


def shard_count(n: int, shard_rows: int, parallelism: int = 1, min_shard_size: int = MIN_SHARD_SIZE) -> int:
    """Shards for ``n`` records: ``ceil(n / shard_rows)``, raised to ``parallelism`` (the session's default
    parallelism: one shard per core) as far as every shard keeps at least ``min_shard_size`` records."""
    return max(1, ceil(n / shard_rows), min(parallelism, n // max(min_shard_size, 1)))


def shard_sizes(n: int, shard_rows: int, parallelism: int = 1, min_shard_size: int = MIN_SHARD_SIZE) -> list[int]:
    """Near-equal shard sizes summing to ``n``, :func:`shard_count` of them."""
    p = shard_count(n, shard_rows, parallelism, min_shard_size)
    return [n // p + (1 if j < n % p else 0) for j in range(p)]


@dataclass(frozen=True)
class ShardContext:
    """Everything a shard task needs (broadcast once per run)."""

    structure: GumStructure
    layout: CountLayout
    targets: np.ndarray
    """Global target tables scaled to n, packed with ``layout``."""
    sizes: tuple[int, ...]
    seed: int
    sharding: ShardingConfig
    """The schedule of this run (:meth:`ShardingConfig.for_model_start` applied with a model)."""
    gum: GumConfig
    """The kernel's settings inside a round (errors are tracked globally, not per shard;
    :meth:`GumConfig.for_model_start` applied with a model)."""
    model: object = None
    """The fitted graphical model the shards start from (records sampled from it), or None: 1-way starts."""

    @property
    def tracked(self) -> tuple[Key, ...]:
        return self.structure.tracked_targets


def make_context(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                 sharding: ShardingConfig = ShardingConfig(), gum: GumConfig = GumConfig(), model: object = None,
                 parallelism: int = 1) -> ShardContext:
    """The run's context: GUM structure, packed global targets scaled to ``n``, shard sizes (``model``: see
    ShardContext).

    With a model, the context runs :meth:`ShardingConfig.for_model_start`'s schedule.
    ``parallelism``: the Spark session's default parallelism (:func:`shard_count`).
    """
    if model is not None:
        sharding = sharding.for_model_start()
    structure = gum_structure(domain, targets.keys(), gum)
    tables = prepare_targets(structure, targets, n)
    layout = CountLayout(domain, list(structure.required_tables) + list(structure.targets))
    sizes = shard_sizes(n, sharding.shard_rows, parallelism, sharding.min_shard_size)
    in_round = replace(gum, track_errors=False)
    return ShardContext(structure, layout, layout.pack(tables), tuple(sizes), int(seed), sharding,
                        in_round if model is None else in_round.for_model_start(), model)
