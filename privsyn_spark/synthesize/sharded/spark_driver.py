"""The Spark driver of sharded GUM (:mod:`privsyn_spark.synthesize.sharded.algorithm`): shard state in a DataFrame.

Shard state lives in Spark as a DataFrame of ``(shard_id, n, codes, counts)`` rows (codes and counts
packed as binary); each round is one ``mapInArrow`` over it running the shard functions of
:mod:`~privsyn_spark.synthesize.sharded.algorithm` (every shard in a Jacobi round, one shard in a Gauss-Seidel turn
while the other rows pass through). Each round's state is checkpointed (reliable checkpoint files when a
checkpoint directory is available, else ``localCheckpoint``), which truncates the lineage. Only counts
reach the driver: their sum by a tree aggregation after every round, and each shard's counts at the
append cores once, for the exact split of the appended attributes. On Spark Connect the shard context
travels inside each round's UDF instead of a broadcast and the sums are DataFrame steps
(:mod:`privsyn_spark.runtime.backend`).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.progress import SILENT, Progress
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.synthesize.gum.kernel import GumConfig, codes_dtype
from privsyn_spark.synthesize.sharded.algorithm import (
    ShardedRun,
    append_shard,
    appended_errors,
    init_shard,
    round_shard,
    split_appended,
    turn_shard,
)
from privsyn_spark.synthesize.sharded.context import ShardContext, ShardingConfig, make_context
from privsyn_spark.synthesize.sharded.reconcile import Step, core_cells

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

STATE_SCHEMA = "shard_id int, n long, codes binary, counts binary"


def _pack_state(pa: Any, rows: list[tuple[int, np.ndarray, np.ndarray]]) -> Any:
    return pa.RecordBatch.from_pydict({
        "shard_id": pa.array([r[0] for r in rows], pa.int32()),
        "n": pa.array([r[1].shape[0] for r in rows], pa.int64()),
        "codes": pa.array([r[1].tobytes(order="F") for r in rows], pa.binary()),
        "counts": pa.array([r[2].astype(np.int64).tobytes() for r in rows], pa.binary()),
    })


def _unpack_state(ctx: ShardContext, batch: Any) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    d = len(ctx.structure.domain)
    dtype = codes_dtype(ctx.structure.domain)
    ids, sizes = batch.column("shard_id").to_pylist(), batch.column("n").to_pylist()
    codes, counts = batch.column("codes"), batch.column("counts")
    for i, (shard, n) in enumerate(zip(ids, sizes)):
        records = np.frombuffer(codes[i].as_buffer(), dtype=dtype).reshape((n, d), order="F").copy()
        yield shard, records, np.frombuffer(counts[i].as_buffer(), dtype=np.int64).copy()


def _init_fn(bc: Any) -> Any:
    def init(batches: Iterator[Any]) -> Any:
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


def _round_fn(bc: Any, bc_deficit: Any, step: Step) -> Any:
    """A Jacobi round (every shard) or one shard's Gauss-Seidel turn (the other shards' rows pass through)."""
    def run_step(batches: Iterator[Any]) -> Any:
        import pyarrow as pa

        ctx, deficit = bc.value, bc_deficit.value
        for batch in batches:
            if step.shard is not None and step.shard not in batch.column("shard_id").to_pylist():
                yield batch
                continue
            rows = []
            for shard, records, counts in _unpack_state(ctx, batch):
                if step.shard is None:
                    records, counts = round_shard(ctx, shard, step.round, records, counts.astype(np.float64),
                                                  deficit)
                elif shard == step.shard:
                    records, counts = turn_shard(ctx, shard, step, records, counts.astype(np.float64), deficit)
                rows.append((shard, records, counts))
            if rows:
                yield _pack_state(pa, rows)
    return run_step


def _decode_fn(bc: Any, bc_split: Any, chunk: int = 1 << 16) -> Any:
    """mapInArrow body: each shard's records with their appended attributes attached, as code batches."""
    def decode(batches: Iterator[Any]) -> Any:
        import pyarrow as pa

        ctx, split = bc.value, bc_split.value
        names = list(ctx.structure.domain.attrs)
        for batch in batches:
            for shard, records, _ in _unpack_state(ctx, batch):
                records = append_shard(ctx, shard, records, split)
                for lo in range(0, records.shape[0], chunk):
                    part = records[lo: lo + chunk]
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(part[:, j].astype(np.int32)) for j in range(len(names))], names=names)
    return decode


def codes_schema(domain: Domain) -> Any:
    """Spark schema of the output: one int column per attribute, in the domain's order."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType([StructField(a, IntegerType(), False) for a in domain.attrs])


@dataclass(frozen=True)
class CodeBatches:
    """Synthetic records as merged codes, still to be made: ``produce`` turns the Arrow batches of ``source``
    (partition ``i`` holds shard ``i``) into batches of codes, one int column per attribute of ``domain``.
    A consumer that maps the codes further runs ``produce`` inside its own Python pass
    (:func:`~privsyn_spark.write.decode.decode_dataframe`), so the rows cross to Python once."""

    source: Any
    """A DataFrame: the shard state, or one row per shard."""
    produce: Callable[[Iterator[Any]], Iterator[Any]]
    domain: Domain

    def dataframe(self) -> DataFrame:
        """The codes as a lazy DataFrame of their own (one int column per attribute, in the domain's order)."""
        return self.source.mapInArrow(self.produce, codes_schema(self.domain))


class _Checkpointer:
    """Materialises each round's state and truncates its lineage; cleans its own old reliable checkpoints.

    On Spark Connect (no SparkContext to set a folder on) the checkpoints are reliable when the server sets
    ``spark.checkpoint.dir`` (Spark's cleaner removes them), else local."""

    def __init__(self, spark: SparkSession, checkpoint_dir: str | None) -> None:
        self.backend = backend = backend_of(spark)
        self.dir = backend.checkpoint_folder(checkpoint_dir)
        self.reliable = self.dir is not None
        self.local_dir = _local_path(backend.context_checkpoint_dir())  # Connect: the server's, not listed here
        self.mine: list[set[str]] = []
        self.stored: set[int] = set()  # the RDD of the last local checkpoint (the earlier ones are released)

    def __call__(self, df: DataFrame) -> Any:
        if not self.reliable:
            out = df.localCheckpoint(eager=True)
            self.backend.release_rdds(self.stored)  # the state before: no longer read
            self.stored = self.backend.checkpointed_rdds(out)
            return out
        before = self._listing()
        out = df.checkpoint(eager=True)
        self.mine.append(self._listing() - before)
        while len(self.mine) > 2:  # the state before the previous one is no longer needed for recovery
            for name in self.mine.pop(0):  # (names are only listed in a local folder)
                shutil.rmtree(os.path.join(str(self.local_dir), name), ignore_errors=True)
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


def _cores_fn(cells: np.ndarray) -> Any:
    def cores(batches: Iterator[Any]) -> Any:
        import pyarrow as pa

        for batch in batches:
            counts = batch.column("counts").to_pylist()
            yield pa.RecordBatch.from_arrays(
                [batch.column("shard_id"), pa.array([np.frombuffer(c, dtype=np.int64)[cells].tobytes() for c in counts],
                                                    pa.binary())], ["shard_id", "cores"])
    return cores


def _collect_cores(state: DataFrame, ctx: ShardContext) -> list[np.ndarray]:
    """Every shard's counts at the append cores, in shard order."""
    cells = core_cells(ctx.structure, ctx.layout)
    if cells.size == 0:
        return [cells] * len(ctx.sizes)
    rows = state.select("shard_id", "counts").mapInArrow(_cores_fn(cells), "shard_id int, cores binary").collect()
    got = {int(r[0]): np.frombuffer(r[1], dtype=np.int64) for r in rows}
    return [got[j] for j in range(len(ctx.sizes))]


def _sum_counts(state: DataFrame) -> np.ndarray:
    """Tree-aggregate the shards' count vectors (only counts reach the driver); by DataFrame steps on
    Spark Connect."""
    total = backend_of(state.sparkSession).sum_vectors(state, "counts")
    assert total is not None  # every shard has a row
    return total


def _pass_through(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body of :func:`warm_worker`: unpickling it imports this module in the worker."""
    yield from batches


def warm_worker(spark: SparkSession, folder: str) -> None:
    """A 1-row Arrow job whose Python worker imports the synthesizer (numpy, pyarrow, GUM) and stays for the
    synthesis (Spark reuses idle workers); ``folder`` is not used (:mod:`privsyn_spark.runtime.warmup`)."""
    spark.range(1).mapInArrow(_pass_through, "id long").collect()


@dataclass
class ShardedGumResult(ShardedRun):
    """Output of :func:`synthesize_sharded`: the run bookkeeping plus the table."""

    batches: CodeBatches | None = None
    """The table's codes, for a consumer that decodes them in the same pass."""

    @property
    def records(self) -> DataFrame:
        """The codes as a lazy Spark DataFrame, one int column per attribute in the domain's order."""
        assert self.batches is not None  # set by synthesize_sharded
        return self.batches.dataframe()


def synthesize_sharded(spark: SparkSession, domain: Domain, targets: Mapping[tuple[str, ...], np.ndarray], n: int,
                       seed: int, sharding: ShardingConfig = ShardingConfig(), gum: GumConfig = GumConfig(),
                       partitions: int | None = None, checkpoint_dir: str | None = None,
                       model: object = None, progress: Progress = SILENT) -> ShardedGumResult:
    """Synthesise ``n`` records with GUM sharded over Spark partitions (see the module docstrings).

    ``partitions`` is the number of Spark partitions holding the shards (default: one per shard); it
    does not change the result. ``checkpoint_dir`` sets the SparkContext checkpoint directory for
    reliable, recomputable checkpoints of the shard state (without one, and none set on the context,
    ``localCheckpoint`` is used). The returned DataFrame is lazy over the last checkpointed state.
    ``model``: the fitted graphical model the targets came from (Private-PGM), broadcast so that shards
    start from its samples instead of independent 1-way draws; None (the consistency fallback): 1-way.
    ``progress`` hears of each round ("GUM round k of N"; the first is the shards' start).
    """
    backend = backend_of(spark)
    ctx = make_context(domain, targets, n, seed, sharding, gum, model, parallelism=backend.default_parallelism())
    p = len(ctx.sizes)
    bc = backend.broadcast(ctx)
    checkpoint = _Checkpointer(spark, checkpoint_dir)
    run = ShardedGumResult(ctx)
    log.info("sharded GUM: %d records in %d shards, %d partitions, %s checkpoints", n, p, partitions or p,
             "reliable" if checkpoint.reliable else "local")

    started = time.perf_counter()
    steps = ctx.sharding.steps(p)
    rounds = progress.loop("synthesize: GUM round", len(steps) + 1, at_most=True, every_step=True)
    ids = spark.range(0, p, 1, numPartitions=min(partitions or p, p))
    state = checkpoint(ids.mapInArrow(_init_fn(bc), STATE_SCHEMA))
    counts = _sum_counts(state)
    done = run._record(counts, started)
    rounds.update(run.rounds)
    for step in steps:
        if done:
            break
        started = time.perf_counter()
        bc_deficit = backend.broadcast(ctx.targets - counts)
        state = checkpoint(state.mapInArrow(_round_fn(bc, bc_deficit, step), STATE_SCHEMA))
        counts = _sum_counts(state)
        bc_deficit.unpersist()
        done = run._record(counts, started)
        rounds.update(run.rounds)
    rounds.close(run.rounds)

    cores = _collect_cores(state, ctx)
    split = split_appended(ctx, cores)
    run.final_errors = appended_errors(ctx, cores, split, counts)
    run.batches = CodeBatches(state, _decode_fn(bc, backend.broadcast(split)), domain)
    log.info("sharded GUM done: %d rounds, worst final L1/n %.5f", run.rounds, run.max_relative_error())
    return run
