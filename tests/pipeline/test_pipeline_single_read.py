"""One read of the input per run: every scan of the input view adds its rows to an accumulator."""

import dataclasses
from pathlib import Path

import pytest

from privsyn_spark.cli import pipeline
from privsyn_spark.cli.pipeline import RunConfig
from privsyn_spark.config import Settings, ShardingConfig, SynthOptions

ADULT = "privsyn_spark/sample/adult.csv.gz"
SCHEMA = "privsyn_spark/sample/adult.schema.yaml"
ROWS = 48842

pytestmark = pytest.mark.slow


def counted_view(spark, name: str):
    """Register ``name`` as the Adult sample seen through a pass-through whose every scan is counted."""
    scanned = spark.sparkContext.accumulator(0)
    raw = spark.read.csv(ADULT, header=True)  # strings; only the header is read here

    def count(batches):
        for batch in batches:
            scanned.add(batch.num_rows)
            yield batch

    raw.mapInArrow(count, raw.schema).createOrReplaceTempView(name)
    return scanned


def test_a_run_scans_its_input_once(spark, tmp_path):
    scanned = counted_view(spark, "privsyn_counted_adult")
    synth = SynthOptions(SCHEMA, 1.0, run_id="once", runs_dir=str(tmp_path / "runs"), no_ledger=True,
                         settings=Settings(sharding=ShardingConfig(gum_rounds=1)))
    config = RunConfig(input="privsyn_counted_adult", input_format="table", output=str(tmp_path / "out"),
                       synth=synth, synth_rows=2000, seed=1, evaluate=False)
    pipeline.run(spark, config)  # measure (two engine passes), estimate, synthesize, write
    assert scanned.value == ROWS  # the input was scanned exactly once
    assert not (Path(config.run_location) / "scratch").exists()  # the scratch is gone

    # the evaluation's counts read the run's codes; only its value-level metrics of the numeric
    # columns read the source's raw values, once for all of them (operators only, not private)
    report = pipeline.run_evaluate(spark, dataclasses.replace(config, evaluate=True))
    assert report["metrics"]["rows"]["real"] == ROWS and report["metrics"]["values"]
    assert scanned.value == 3 * ROWS  # a step of its own: its codes (one scan) + the raw values (one scan)
    assert not (Path(config.run_location) / "scratch").exists()
