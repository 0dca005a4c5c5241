"""The synthesize stage: synthetic records as merged codes, by GUM sharded over Spark or by
sampling the Private-PGM model; post-processing of the measurements, their targets and model only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.progress import SILENT, Progress
from privsyn_spark.synthesize.pgm_sampling import sample_model_sharded
from privsyn_spark.synthesize.sharded.spark_driver import CodeBatches, synthesize_sharded

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from privsyn_spark.synthesize.gum.structure import GumConfig
    from privsyn_spark.synthesize.sharded.context import ShardingConfig

SYNTHESIZERS = ("gum", "pgm")
"""``gum``: PrivSyn's GUM on the consistent targets (started from the model's samples when there is
one); ``pgm``: records sampled from the graphical model itself."""


def synthesize_codes(spark: SparkSession, measurements: Measurements, rows: int, seed: int, *, synthesizer: str,
                     targets: dict[tuple[str, ...], np.ndarray] | None, model: Any = None, sharding: ShardingConfig,
                     gum: GumConfig, checkpoint_dir: str | None = None,
                     progress: Progress = SILENT) -> tuple[CodeBatches, dict[str, Any]]:
    """``(merged codes, description)``: ``rows`` records, one int column per attribute (a lazy
    :class:`~privsyn_spark.synthesize.sharded.spark_driver.CodeBatches`).

    ``model``: the estimate stage's graphical model (GUM starts from its samples; the ``pgm``
    synthesizer samples it, and needs it); ``sharding``: shards and GUM's reconciliation schedule;
    ``gum``: the GUM kernel's settings; ``checkpoint_dir``: reliable checkpoints
    (a lost executor's shards are recomputed from them; None: local checkpoints); ``progress``: GUM's rounds.
    """
    if synthesizer == "gum":
        if targets is None:
            raise ValueError("the gum synthesizer needs the estimate stage's targets")
        result = synthesize_sharded(spark, measurements.domain, targets, rows, seed=seed, sharding=sharding, gum=gum,
                                    checkpoint_dir=checkpoint_dir, model=model, progress=progress)
        rounds = [{"round": r, "l1_error": max(errors.values(), default=0.0) / max(result.n, 1), "seconds": seconds}
                  for r, (errors, seconds) in enumerate(zip(result.history, result.round_seconds))]
        info = {"shards": len(result.context.sizes), "start": "1-way" if model is None else "model",
                "rounds": rounds, "final_l1_error": result.max_relative_error(),
                "final_errors": {",".join(k): v / max(result.n, 1) for k, v in result.final_errors.items()}}
        assert result.batches is not None
        return result.batches, info
    if synthesizer == "pgm":
        if model is None or targets is None:
            raise ValueError("the pgm synthesizer needs the estimate stage's graphical model and targets")
        return sample_model_sharded(spark, measurements, rows, seed, model, targets, shard_rows=sharding.shard_rows)
    raise ValueError(f"unknown synthesizer {synthesizer!r} (use one of {SYNTHESIZERS})")
