"""The `pgm` synthesizer: sample records from the Private-PGM model, sharded over Spark partitions.

The model is fitted on the driver from the measurements artifact (post-processing), broadcast,
and every shard draws its records with exact tree sampling (systematic rounding inside each
shard) from a generator seeded by (seed, shard id): the same seed gives the same table whatever
the number of executors. Needs a junction tree within the cell budget; otherwise use `gum`.
"""

from __future__ import annotations

import logging

import numpy as np

from privsyn_spark.estimate.estimation import MirrorDescent
from privsyn_spark.estimate.junction_tree import DEFAULT_CELL_BUDGET, JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.randomness import Stage, generator
from privsyn_spark.synthesize.sharded import shard_sizes
from privsyn_spark.synthesize.sharded_spark import codes_schema

log = logging.getLogger(__name__)


def sample_model_sharded(spark, measurements: Measurements, rows: int, seed: int, shard_rows: int = 1_000_000,
                         cell_budget: float = DEFAULT_CELL_BUDGET):
    """``(DataFrame of merged codes, info)``: ``rows`` records sampled from the fitted model."""
    import pyarrow as pa

    domain = measurements.domain
    cliques = list(dict.fromkeys(domain.canonical(m.attrs) for m in measurements.marginals))
    try:
        tree = build_junction_tree(domain, cliques, cell_budget)
    except JunctionTreeTooLarge as exc:
        raise ValueError(f"the pgm synthesizer needs a junction tree within the cell budget: {exc}; "
                         f"use --synthesizer gum") from None
    fit = MirrorDescent(cell_budget=cell_budget).estimate(measurements.marginals, domain,
                                                         measurements.noisy_total, tree=tree)
    sizes = shard_sizes(rows, shard_rows)
    model = spark.sparkContext.broadcast(fit.model)
    log.info("pgm sampling: %d records in %d shards from a model fitted in %d iterations", rows, len(sizes),
             fit.iterations)

    def sample(batches):
        for batch in batches:
            for shard in batch.column(0).to_numpy():
                rng = generator(seed, Stage.PGM_SAMPLE, int(shard))
                codes = model.value.sample(sizes[int(shard)], rng)
                yield pa.RecordBatch.from_arrays([pa.array(codes[:, j].astype(np.int32))
                                                  for j in range(len(domain))], names=list(domain.attrs))

    records = spark.range(0, len(sizes), 1, numPartitions=len(sizes)).mapInArrow(sample, codes_schema(domain))
    info = {"shards": len(sizes), "estimator_iterations": fit.iterations, "converged": fit.converged,
            "max_clique_cells": tree.max_clique_cells}
    return records, info
