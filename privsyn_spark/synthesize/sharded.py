"""GUM sharded over Spark partitions, with periodic global reconciliation.

``n`` synthetic records are split into ``P`` shards (about ``shard_size`` records each), one Spark
partition each. A round is one ``mapInArrow`` over the shard state: every shard runs ``k`` local GUM
iterations (:mod:`privsyn_spark.synthesize.gum`) toward its local targets and emits its records and its
marginal counts. Only the counts travel to the driver, summed by a tree aggregation; the driver
broadcasts the global deficit ``target - current`` and each shard's next local target is its own counts
plus its share of the deficit (an integer split of every cell across shards, proportional to shard
size), so the union converges to the global targets rather than each shard to a noisy copy. Rounds stop
on a tolerance or a round cap; appended attributes (attribute appending) are attached at the end.

Shard state lives in Spark as a DataFrame of ``(shard_id, n, codes, counts)`` rows (codes and counts
packed as binary); each round's state is checkpointed (reliable checkpoint files when a checkpoint
directory is available, else ``localCheckpoint``), which truncates the lineage. Every random draw of a
shard derives from ``(seed, shard id, round)`` (``np.random.SeedSequence`` spawn keys), so a recomputed
task, or the same run on another number of executors or Spark partitions, yields the identical table.

:func:`run_shards_locally` runs the same shard functions in one process without Spark (reference and
benchmark baseline); :func:`synthesize_sharded` is the Spark driver.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import ceil
from urllib.parse import urlparse

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum import (
    GumConfig,
    GumPlan,
    Key,
    append_attributes,
    codes_dtype,
    initialize_records,
    marginal_counts,
    plan_gum,
    prepare_targets,
    run_gum,
)

log = logging.getLogger(__name__)

_INIT, _ROUND, _SPLIT, _APPEND = 0, 1, 2, 3  # spawn-key tags of the random streams


@dataclass(frozen=True)
class ShardedGumConfig:
    """Settings of sharded GUM."""

    gum: GumConfig = field(default_factory=GumConfig)
    """The per-shard kernel's settings (``gum.iterations`` is not used: rounds x iterations_per_round)."""
    shard_size: int = 1_000_000
    """Target records per shard; ``P = ceil(n / shard_size)`` shards of near-equal size."""
    iterations_per_round: int = 10
    """Local GUM iterations (k) between two reconciliations."""
    max_rounds: int = 8
    """Round cap (the first round starts from the 1-way initialisation)."""
    tolerance: float = 0.0
    """Stop when every tracked target's union L1 / n is at or below this (0: run ``max_rounds``)."""

    def __post_init__(self) -> None:
        if self.shard_size < 1 or self.iterations_per_round < 1 or self.max_rounds < 1:
            raise ValueError("ShardedGumConfig: shard_size, iterations_per_round and max_rounds must be >= 1")


def shard_sizes(n: int, shard_size: int) -> list[int]:
    """Near-equal shard sizes summing to ``n`` (``ceil(n / shard_size)`` shards, at least one)."""
    p = max(1, ceil(n / shard_size))
    return [n // p + (1 if j < n % p else 0) for j in range(p)]


def shard_rng(seed: int, tag: int, shard: int, round_: int) -> np.random.Generator:
    """The random stream of one shard at one stage: a function of (seed, stage, shard id, round) only."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(tag, shard, round_)))


class TableLayout:
    """Offsets of several count tables packed into one flat vector (what shards send to the driver)."""

    def __init__(self, domain: Domain, keys: Sequence[Key]) -> None:
        self.domain = domain
        self.keys = tuple(dict.fromkeys(keys))
        sizes = [domain.cells(k) for k in self.keys]
        self.offsets = dict(zip(self.keys, np.cumsum([0] + sizes[:-1]).tolist()))
        self.size = int(sum(sizes))

    def pack(self, tables: Mapping[Key, np.ndarray], dtype=np.float64) -> np.ndarray:
        """Flat vector holding every table of the layout."""
        out = np.zeros(self.size, dtype=dtype)
        for k in self.keys:
            out[self.offsets[k]: self.offsets[k] + self.domain.cells(k)] = np.asarray(tables[k]).ravel()
        return out

    def unpack(self, flat: np.ndarray) -> dict[Key, np.ndarray]:
        """Tables (views into ``flat``) keyed as in the layout."""
        return {k: flat[self.offsets[k]: self.offsets[k] + self.domain.cells(k)].reshape(self.domain.shape(k))
                for k in self.keys}

    def count(self, records: np.ndarray) -> np.ndarray:
        """Flat int64 counts of ``records`` over every table of the layout."""
        return self.pack({k: marginal_counts(records, self.domain, k) for k in self.keys}, np.int64)


def deficit_share(deficit: np.ndarray, sizes: Sequence[int], shard: int, u: np.ndarray,
                  holder: np.ndarray) -> np.ndarray:
    """Shard ``shard``'s part of a flat deficit vector: integer parts proportional to shard size.

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


# ------------------------------------------------------------------------------ shard functions (numpy)


@dataclass(frozen=True)
class ShardContext:
    """Everything a shard task needs (broadcast once per run)."""

    plan: GumPlan
    layout: TableLayout
    targets: np.ndarray
    """Global target tables scaled to n, packed with ``layout``."""
    sizes: tuple[int, ...]
    seed: int
    config: ShardedGumConfig

    @property
    def tracked(self) -> tuple[Key, ...]:
        return self.plan.tracked_targets


def init_shard(ctx: ShardContext, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Round 0 of a shard: 1-way start, then k iterations toward the global targets scaled to the shard."""
    n = ctx.sizes[shard]
    total = float(sum(ctx.sizes))
    tables = {k: v * (n / total) for k, v in ctx.layout.unpack(ctx.targets).items()}
    rng = shard_rng(ctx.seed, _INIT, shard, 0)
    records = initialize_records(ctx.plan, tables, n, rng)
    k = ctx.config.iterations_per_round
    run_gum(records, ctx.plan, tables, _quiet(ctx.config.gum), rng, start_iteration=0, iterations=k)
    return records, ctx.layout.count(records)


def round_shard(ctx: ShardContext, shard: int, round_: int, records: np.ndarray, counts: np.ndarray,
                deficit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One round of a shard: local target = own counts + share of the deficit, then k iterations."""
    split = shard_rng(ctx.seed, _SPLIT, 0, round_)  # the same draws in every shard
    u, holder = split.random(deficit.size), split.integers(0, len(ctx.sizes), deficit.size)
    local = np.maximum(counts + deficit_share(deficit, ctx.sizes, shard, u, holder), 0.0)
    tables = ctx.layout.unpack(local)
    k = ctx.config.iterations_per_round
    rng = shard_rng(ctx.seed, _ROUND, shard, round_)
    run_gum(records, ctx.plan, tables, _quiet(ctx.config.gum), rng, start_iteration=round_ * k, iterations=k)
    return records, ctx.layout.count(records)


def append_shard(ctx: ShardContext, shard: int, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attach the appended attributes of a shard (conditionals of the global targets)."""
    append_attributes(records, ctx.plan, ctx.layout.unpack(ctx.targets), shard_rng(ctx.seed, _APPEND, shard, 0))
    return records, ctx.layout.count(records)


def _quiet(config: GumConfig) -> GumConfig:
    """The kernel's settings inside a round (errors are tracked globally, not per shard)."""
    return replace(config, track_errors=False)


def make_context(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                 config: ShardedGumConfig) -> ShardContext:
    """Plan the run: GUM plan, packed global targets scaled to ``n``, shard sizes."""
    plan = plan_gum(domain, targets.keys(), config.gum)
    tables = prepare_targets(plan, targets, n)
    layout = TableLayout(domain, list(plan.required_tables) + list(plan.targets))
    return ShardContext(plan, layout, layout.pack(tables), tuple(shard_sizes(n, config.shard_size)), int(seed),
                        config)


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
        return worst <= self.context.config.tolerance


def run_shards_locally(domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                       config: ShardedGumConfig | None = None) -> tuple[np.ndarray, ShardedRun]:
    """The sharded algorithm in one process, no Spark: ``(records of all shards stacked, run)``.

    Same shard functions and random streams as :func:`synthesize_sharded`, hence the same table.
    """
    config = config or ShardedGumConfig()
    ctx = make_context(domain, targets, n, seed, config)
    run = ShardedRun(ctx)
    started = time.perf_counter()
    state = [init_shard(ctx, j) for j in range(len(ctx.sizes))]
    done = run._record(sum(c for _, c in state), started)
    for r in range(1, config.max_rounds):
        if done:
            break
        started = time.perf_counter()
        deficit = ctx.targets - sum(c for _, c in state)
        state = [round_shard(ctx, j, r, rec, c.astype(np.float64), deficit) for j, (rec, c) in enumerate(state)]
        done = run._record(sum(c for _, c in state), started)
    state = [append_shard(ctx, j, rec) for j, (rec, _) in enumerate(state)]
    run.final_errors = union_errors(ctx, sum(c for _, c in state), ctx.plan.targets)
    return np.concatenate([rec for rec, _ in state]), run


# ------------------------------------------------------------------------------------------ Spark side


STATE_SCHEMA = "shard_id int, n long, codes binary, counts binary"


def _pack_state(pa, rows: list[tuple[int, np.ndarray, np.ndarray]]):
    return pa.RecordBatch.from_pydict({
        "shard_id": pa.array([r[0] for r in rows], pa.int32()),
        "n": pa.array([r[1].shape[0] for r in rows], pa.int64()),
        "codes": pa.array([r[1].tobytes(order="F") for r in rows], pa.binary()),
        "counts": pa.array([r[2].astype(np.int64).tobytes() for r in rows], pa.binary()),
    })


def _unpack_state(ctx: ShardContext, batch) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    d = len(ctx.plan.domain)
    dtype = codes_dtype(ctx.plan.domain)
    ids, sizes = batch.column("shard_id").to_pylist(), batch.column("n").to_pylist()
    codes, counts = batch.column("codes"), batch.column("counts")
    for i, (shard, n) in enumerate(zip(ids, sizes)):
        records = np.frombuffer(codes[i].as_buffer(), dtype=dtype).reshape((n, d), order="F").copy()
        yield shard, records, np.frombuffer(counts[i].as_buffer(), dtype=np.int64).copy()


def _init_fn(bc):
    def init(batches):
        import pyarrow as pa

        ctx = bc.value
        for batch in batches:
            rows = []
            for shard in batch.column("id").to_pylist():
                records, counts = init_shard(ctx, int(shard))
                rows.append((int(shard), records, counts))
            if rows:
                yield _pack_state(pa, rows)
    return init


def _round_fn(bc, bc_deficit, round_: int):
    def step(batches):
        import pyarrow as pa

        ctx, deficit = bc.value, bc_deficit.value
        for batch in batches:
            rows = []
            for shard, records, counts in _unpack_state(ctx, batch):
                records, counts = round_shard(ctx, shard, round_, records, counts.astype(np.float64), deficit)
                rows.append((shard, records, counts))
            if rows:
                yield _pack_state(pa, rows)
    return step


def _append_fn(bc):
    def finish(batches):
        import pyarrow as pa

        ctx = bc.value
        for batch in batches:
            rows = [(shard, *append_shard(ctx, shard, records)) for shard, records, _ in _unpack_state(ctx, batch)]
            if rows:
                yield _pack_state(pa, rows)
    return finish


def _decode_fn(bc, chunk: int = 1 << 16):
    def decode(batches):
        import pyarrow as pa

        ctx = bc.value
        names = list(ctx.plan.domain.attrs)
        for batch in batches:
            for _, records, _ in _unpack_state(ctx, batch):
                for lo in range(0, records.shape[0], chunk):
                    part = records[lo: lo + chunk]
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(part[:, j].astype(np.int32)) for j in range(len(names))], names=names)
    return decode


def codes_schema(domain: Domain):
    """Spark schema of the output: one int column per attribute, in the domain's order."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType([StructField(a, IntegerType(), False) for a in domain.attrs])


class _Checkpointer:
    """Materialises each round's state and truncates its lineage; cleans its own old reliable checkpoints."""

    def __init__(self, spark, checkpoint_dir: str | None) -> None:
        sc = spark.sparkContext
        if checkpoint_dir is not None:
            sc.setCheckpointDir(checkpoint_dir)
        self.dir = sc.getCheckpointDir()
        self.reliable = self.dir is not None
        self.local_dir = _local_path(self.dir) if self.reliable else None
        self.mine: list[set[str]] = []

    def __call__(self, df):
        if not self.reliable:
            return df.localCheckpoint(eager=True)
        before = self._listing()
        out = df.checkpoint(eager=True)
        self.mine.append(self._listing() - before)
        while len(self.mine) > 2:  # the state before the previous one is no longer needed for recovery
            for name in self.mine.pop(0):
                shutil.rmtree(os.path.join(self.local_dir, name), ignore_errors=True)
        return out

    def _listing(self) -> set[str]:
        if self.local_dir is None or not os.path.isdir(self.local_dir):
            return set()
        return {e for e in os.listdir(self.local_dir) if e.startswith("rdd-")}


def _local_path(uri: str | None) -> str | None:
    if uri is None:
        return None
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme in ("", "file") else None


def _sum_counts(state) -> np.ndarray:
    """Tree-aggregate the shards' count vectors (only counts reach the driver)."""
    return (state.select("counts").rdd
            .map(lambda row: np.frombuffer(row[0], dtype=np.int64))
            .treeReduce(np.add, depth=2))


@dataclass
class ShardedGumResult(ShardedRun):
    """Output of :func:`synthesize_sharded`: the run bookkeeping plus the table."""

    records: object = None
    """Spark DataFrame of codes, one int column per attribute in the domain's order."""


def synthesize_sharded(spark, domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int, seed: int,
                       config: ShardedGumConfig | None = None, partitions: int | None = None,
                       checkpoint_dir: str | None = None) -> ShardedGumResult:
    """Synthesise ``n`` records with GUM sharded over Spark partitions (see the module docstring).

    ``partitions`` is the number of Spark partitions holding the shards (default: one per shard); it
    does not change the result. ``checkpoint_dir`` sets the SparkContext checkpoint directory for
    reliable, recomputable checkpoints of the shard state (without one, and none set on the context,
    ``localCheckpoint`` is used). The returned DataFrame is lazy over the last checkpointed state.
    """
    config = config or ShardedGumConfig()
    ctx = make_context(domain, targets, n, seed, config)
    p = len(ctx.sizes)
    sc = spark.sparkContext
    bc = sc.broadcast(ctx)
    checkpoint = _Checkpointer(spark, checkpoint_dir)
    run = ShardedGumResult(ctx)
    log.info("sharded GUM: %d records in %d shards, %d partitions, %s checkpoints", n, p, partitions or p,
             "reliable" if checkpoint.reliable else "local")

    started = time.perf_counter()
    ids = spark.range(0, p, 1, numPartitions=min(partitions or p, p))
    state = checkpoint(ids.mapInArrow(_init_fn(bc), STATE_SCHEMA))
    counts = _sum_counts(state)
    done = run._record(counts, started)
    for r in range(1, config.max_rounds):
        if done:
            break
        started = time.perf_counter()
        bc_deficit = sc.broadcast(ctx.targets - counts)
        state = checkpoint(state.mapInArrow(_round_fn(bc, bc_deficit, r), STATE_SCHEMA))
        counts = _sum_counts(state)
        bc_deficit.unpersist()
        done = run._record(counts, started)

    state = checkpoint(state.mapInArrow(_append_fn(bc), STATE_SCHEMA))
    run.final_errors = union_errors(ctx, _sum_counts(state), ctx.plan.targets)
    run.records = state.mapInArrow(_decode_fn(bc), codes_schema(domain))
    log.info("sharded GUM done: %d rounds, worst final L1/n %.5f", run.rounds, run.max_relative_error())
    return run
