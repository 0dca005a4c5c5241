"""The `pgm` synthesizer end to end on a generated table whose junction tree is small."""

import dataclasses
import json

import numpy as np
import pytest

from privsyn_spark.cli import pipeline
from privsyn_spark.cli.pipeline import RunConfig
from privsyn_spark.config import Settings, ShardingConfig, SynthOptions
from privsyn_spark.sample.generator import generated_schema, generated_table
from tests.pipeline.test_pipeline_run import assert_same_rows

pytestmark = pytest.mark.slow


def test_pgm_synthesizer_reproduces_a_dependent_pair(spark, tmp_path):
    sizes = [3, 4, 5, 3]
    generated_table(spark, 20_000, sizes, dependent=[1], dependence=0.9, seed=5,
                    partitions=3).write.parquet(str(tmp_path / "in"))
    (tmp_path / "schema.json").write_text(json.dumps(generated_schema(sizes)))
    synth = SynthOptions(str(tmp_path / "schema.json"), 4.0, run_id="pgm", runs_dir=str(tmp_path / "runs"),
                         synthesizer="pgm", no_ledger=True,
                         settings=Settings(sharding=ShardingConfig(shard_rows=10_000)))
    config = RunConfig(input=str(tmp_path / "in"), output=str(tmp_path / "out"), synth=synth, synth_rows=30_000,
                       evaluate=False, seed=1)
    pipeline.run(spark, config)
    real = spark.read.parquet(str(tmp_path / "in")).toPandas()
    synth = spark.read.format("delta").load(config.output).toPandas()
    assert len(synth) == 30_000
    # no nulls in the input: the noisy null/other counts allow only a few
    assert (synth.isna().mean() < 0.005).all(), synth.isna().sum()
    for frame in (real, synth):
        frame["pair"] = frame["x0"].astype("Int64").astype(str) + "-" + frame["x1"].astype("Int64").astype(str)
    p = real["pair"].value_counts(normalize=True)
    q = synth["pair"].value_counts(normalize=True).reindex(p.index, fill_value=0)
    assert 0.5 * np.abs(p - q).sum() < 0.05  # the dependent pair is kept (independence would give ~0.6)
    overwrite = dataclasses.replace(config.write, mode="overwrite")
    pipeline.run_synthesize(spark, dataclasses.replace(config, write=overwrite))  # same seed: same table
    again = spark.read.format("delta").load(config.output).toPandas()
    assert_same_rows(again, synth.drop(columns=["pair"]))
