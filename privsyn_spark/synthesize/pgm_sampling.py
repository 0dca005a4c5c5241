"""The `pgm` synthesizer: sample records from the Private-PGM model, sharded over Spark partitions.

The model is the one the estimate step fitted (passed in; :func:`fit_model` when estimation fell
back to consistency); it is broadcast, and every shard (one Spark partition, ``shard_rows`` records, or
fewer so that every core of the session gets a shard of at least 10^5 records:
:func:`~privsyn_spark.synthesize.sharded.context.shard_count`) draws its records with exact tree
sampling, ``chunk`` records at a time (systematic rounding inside each chunk), from a generator seeded by
(seed, shard id): the same seed and shard count give the same table whatever the number of executors.
A sampled code the targets' 1-way tables rule out (a zeroed merged value, or one made of absent
null/``other`` codes only: :mod:`privsyn_spark.estimate.zeroed_values`) is redrawn from those shares, as
GUM's model start does: the model's fit gives such codes a little mass, and decoding would turn them
into nulls below the rare-value threshold (hundreds per 10^6 records).
Each shard's work and memory are linear in its rows and bounded by the chunk, so 10^8 records are
100 independent tasks. Needs a junction tree within the cell budget; otherwise use `gum`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.estimate.estimation import MirrorDescent
from privsyn_spark.estimate.junction_tree import JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.randomness import Stage, generator
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET
from privsyn_spark.synthesize.gum.update import redraw_ruled_out
from privsyn_spark.synthesize.sharded.context import shard_sizes
from privsyn_spark.synthesize.sharded.spark_driver import CodeBatches

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


SAMPLE_CHUNK = 1 << 18
"""Records a shard draws from the model at a time."""
BATCH_ROWS = 1 << 16
"""Records per Arrow batch sent to Spark."""


def sample_shard(model: Any, rows: int, seed: int, shard: int, chunk: int = SAMPLE_CHUNK,
                 batch: int = BATCH_ROWS, one_way: Mapping[tuple[str, ...], np.ndarray] | None = None
                 ) -> Iterator[np.ndarray]:
    """Shard ``shard``'s ``rows`` records from ``model``: int32 code arrays of at most ``batch`` rows.

    Records are drawn ``chunk`` at a time (memory bounded by the chunk, work linear in ``rows``); a pure
    function of its arguments, so a recomputed task yields the same records. ``one_way``: the targets'
    1-way tables; codes they rule out are redrawn from their shares (module docstring).
    """
    rng = generator(seed, Stage.PGM_SAMPLE, int(shard))
    for lo in range(0, rows, chunk):
        codes = model.sample(min(chunk, rows - lo), rng).astype(np.int32)
        if one_way:
            codes = redraw_ruled_out(codes, model.domain.attrs, one_way, rng)
        for start in range(0, codes.shape[0], batch):
            yield codes[start: start + batch]


def fit_model(measurements: Measurements, cell_budget: float | None = DEFAULT_CELL_BUDGET) -> Any:
    """``(model, info)``: Private-PGM (mirror descent) fitted to the measurements, as the estimate step fits it."""
    domain = measurements.domain
    cliques = list(dict.fromkeys(domain.canonical(m.attrs) for m in measurements.marginals))
    try:
        tree = build_junction_tree(domain, cliques, cell_budget)
    except JunctionTreeTooLarge as exc:
        raise ValueError(f"the pgm synthesizer needs a junction tree within the cell budget: {exc}; "
                         f"use --synthesizer gum") from None
    fit = MirrorDescent(cell_budget=cell_budget).estimate(measurements.marginals, domain,
                                                         measurements.noisy_total, tree=tree)
    return fit.model, {"estimator_iterations": fit.iterations, "converged": fit.converged,
                       "max_clique_cells": tree.max_clique_cells}


def sample_model_sharded(spark: SparkSession, measurements: Measurements, rows: int, seed: int, model: Any,
                         targets: Mapping[tuple[str, ...], np.ndarray], shard_rows: int = 1_000_000) -> Any:
    """``(merged codes, info)``: ``rows`` records sampled from ``model``, the graphical
    model the estimate step fitted (or :func:`fit_model`; reused, never fitted here), never in a code
    the ``targets`` rule out."""
    import pyarrow as pa

    domain = measurements.domain
    one_way: dict[tuple[str, ...], np.ndarray] = {(a,): np.asarray(targets[(a,)], dtype=np.float64)
                                                 for a in domain.attrs if (a,) in targets}
    sizes = shard_sizes(rows, shard_rows, parallelism=backend_of(spark).default_parallelism())
    log.info("pgm sampling: %d records in %d shards", rows, len(sizes))
    model = backend_of(spark).broadcast(model)

    def sample(batches: Iterator[Any]) -> Any:
        for batch in batches:
            for shard in batch.column(0).to_numpy():
                for codes in sample_shard(model.value, sizes[int(shard)], seed, int(shard), one_way=one_way):
                    yield pa.RecordBatch.from_arrays([pa.array(codes[:, j]) for j in range(len(domain))],
                                                     names=list(domain.attrs))

    shards = spark.range(0, len(sizes), 1, numPartitions=len(sizes))
    return CodeBatches(shards, sample, domain), {"shards": len(sizes), "model": "from the estimate step"}
