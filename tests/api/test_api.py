"""The Python API: fit on an in-memory DataFrame, sample, save/load, plan without data, one charge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark import PrivSyn, Schema, Settings, ShardingConfig, write_delta
from privsyn_spark.budget import ledger as L
from privsyn_spark.errors import UsageError

SCHEMA = {"columns": [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "b", "type": "categorical", "values": ["p", "q"]},
    {"name": "n", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 5},
]}


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(11)
    n = 4000
    a = rng.choice(["x", "y", "z"], n)
    b = np.where(a == "x", "p", rng.choice(["p", "q"], n))  # a and b dependent
    return pd.DataFrame({"a": a, "b": b, "n": rng.integers(0, 100, n).astype("int32")})


@pytest.fixture(scope="module")
def fitted(spark, frame, tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    ledger = str(root / "ledger")
    L.set_budget(spark, ledger, "toy", epsilon=5.0, delta=1e-9)
    synth = PrivSyn(Schema.from_dict(SCHEMA), epsilon=2.0, delta=1e-9, ledger=ledger, dataset_id="toy",
                    run_id="api1", runs_dir=str(root / "runs"),
                    settings=Settings(sharding=ShardingConfig(shard_rows=1500)))
    conf_before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    model = synth.fit(spark.createDataFrame(frame))  # a DataFrame built in memory
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == conf_before  # caller's session kept
    return root, ledger, synth, model


def test_fit_charges_the_ledger_once_and_sample_save_load_do_not(spark, fitted):
    root, ledger, synth, model = fitted
    spent = L.dataset_state(spark, ledger, "toy").spent_rho
    assert spent == pytest.approx(synth.plan().rho, rel=1e-12)
    rows = L.read_ledger(spark, ledger, "toy").count()
    model.sample(2000, seed=1).count()
    model.save(str(root / "model"))
    PrivSyn.load(str(root / "model")).sample(2000, seed=1).count()
    assert L.dataset_state(spark, ledger, "toy").spent_rho == spent
    assert L.read_ledger(spark, ledger, "toy").count() == rows


def test_sample_has_the_schema_types_and_reproduces_after_load(spark, fitted):
    root, _, _, model = fitted
    out = model.sample(3000, seed=7)
    assert out.columns == ["a", "b", "n"]
    assert dict(out.dtypes) == {"a": "string", "b": "string", "n": "int"}
    first = out.toPandas()
    assert len(first) == 3000 and first["n"].dropna().between(0, 99).all()
    model.save(str(root / "model7"))
    again = PrivSyn.load(str(root / "model7")).sample(3000, seed=7).toPandas()
    pd.testing.assert_frame_equal(first, again)
    other = model.sample(3000, seed=8).toPandas()
    assert not first.equals(other)
    # the dependence a=x -> b=p survives (an independent table would put ~half of a=x rows at b=q)
    x = first[first["a"] == "x"]
    assert (x["b"] == "p").mean() > 0.8


def test_plan_reads_no_data_and_matches_the_release(spark, fitted):
    from pyspark.sql import functions as F

    _, _, synth, model = fitted

    @F.udf("string")
    def explode(value):
        raise RuntimeError("scanned")

    poisoned = spark.range(3).select(explode("id").alias("a"), explode("id").alias("b"), explode("id").alias("n"))
    plan = synth.plan(poisoned)  # only its column names are looked at: a scan would raise
    released = {r["name"]: r for r in model.measurements.ledger if r["name"].startswith("one_way:")}
    for name, rho, sigma, _ in plan.releases:
        if name in released:
            assert rho == pytest.approx(released[name]["rho"], rel=1e-12)
            assert sigma == pytest.approx(released[name]["sigma_requested"], rel=1e-12)
    assert set(released) == {n for n, *_ in plan.releases if n.startswith("one_way:")}
    assert "one_way:a" in str(plan)
    with pytest.raises(UsageError, match="not in the schema|missing|column"):
        synth.plan(spark.range(1).select(F.lit("x").alias("zz")))


def test_write_delta_records_the_model(spark, fitted):
    from privsyn_spark.write.delta_output import table_properties

    root, _, _, model = fitted
    out = model.sample(500, seed=2)
    version = write_delta(out, str(root / "out"), provenance=model)
    assert version == 0
    props = table_properties(spark, str(root / "out"))
    assert props["privsyn.run_id"] == "api1" and props["privsyn.seed"] == "2"


def test_a_synthesizer_needs_a_ledger_or_an_explicit_no_ledger():
    with pytest.raises(UsageError, match="no_ledger=True"):
        PrivSyn(Schema.from_dict(SCHEMA), epsilon=1.0)
    with pytest.raises(UsageError, match="dataset_id"):
        PrivSyn(Schema.from_dict(SCHEMA), epsilon=1.0, ledger="somewhere")


def test_release_is_the_deprecated_name_of_charge():
    synth = PrivSyn(Schema.from_dict(SCHEMA), epsilon=1.0, no_ledger=True)
    with pytest.warns(DeprecationWarning, match="PrivSyn.charge"):
        old = synth.release("r1", {"day": "1"})
    assert old == synth.charge("r1", {"day": "1"})


SAMPLE_IN_ANOTHER_PROCESS = """
import sys
from privsyn_spark.runtime.session import build_spark_session
spark = build_spark_session(master="local[1]", delta=False, conf={
    "spark.sql.execution.arrow.maxRecordsPerBatch": "37", "spark.default.parallelism": "3",
    "spark.sql.shuffle.partitions": "5"})
from privsyn_spark import PrivSyn
model = PrivSyn.load(sys.argv[1])
for synthesizer, out in (("gum", sys.argv[2]), ("pgm", sys.argv[3])):
    model.synthesizer = synthesizer
    model.sample(4000, seed=5).write.parquet(out)
"""


def sorted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


@pytest.mark.slow
def test_two_processes_with_other_arrow_batches_and_parallelism_sample_the_same_table(spark, fitted):
    """Another process (1 core, Arrow batches of 37 rows, other default parallelism) samples the saved
    model into the identical table, for both synthesizers (3 GUM shards of at most 1500 records)."""
    import dataclasses
    import os
    import subprocess
    import sys

    root, _, _, model = fitted
    model.save(str(root / "model5"))
    outs = [str(root / "gum5"), str(root / "pgm5")]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", SAMPLE_IN_ANOTHER_PROCESS, str(root / "model5"), *outs],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for synthesizer, out in zip(("gum", "pgm"), outs):
        here = dataclasses.replace(model, synthesizer=synthesizer).sample(4000, seed=5).toPandas()
        there = pd.read_parquet(out)
        assert len(here) == 4000
        pd.testing.assert_frame_equal(sorted_rows(here), sorted_rows(there), check_dtype=False)


def test_a_saved_model_carries_nothing_exact(spark, fitted):
    """Issue 24, P3: model.json holds no domain-policy tallies and no timings (they stay in the operator's
    run folder, state.json); the model loads and samples without them."""
    import json

    root, _, _, model = fitted
    model.record.domain_handling = {"a": {"nulls": 315, "null_handling": "value"}}  # as a run with nulls finds
    model.save(str(root / "saved-p3"))
    text = (root / "saved-p3" / "model.json").read_text()
    record = json.loads(text)["record"]
    import re

    assert "domain_handling" not in record and "timings" not in record
    assert not re.search(r"(?<![\d.eE+-])315(?![\d.])", text)  # the tally as a number, not digits of a float
    assert set(record) <= {"estimation", "synthesis", "output_version", "dataset_ledger"}
    assert PrivSyn.load(str(root / "saved-p3")).sample(100, seed=1).count() == 100
