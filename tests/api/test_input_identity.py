"""Fingerprinted reuse: a run id is bound to its input's identity, not only to its settings.

A DataFrame's identity is the hash of its analyzed plan and the folders it reads (never its rows); a
table location's is the location, with its Delta version recorded. Reusing a run id with another input
is refused in one line (exit 2 in the CLI) unless ``reuse="force"``; a Delta input that only moved to a
newer version is reused with a :class:`StaleInputWarning`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from privsyn_spark import PrivSyn, Schema
from privsyn_spark.budget import ledger as L
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.measurements import content_hash
from privsyn_spark.runtime.input_identity import StaleInputWarning, frame_identity

pytestmark = pytest.mark.slow

SCHEMA = {"columns": [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "n", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 5},
]}


def table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.choice(["x", "y", "z"], n), "n": rng.integers(0, 100, n).astype("int32")})


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    spark.createDataFrame(table()).write.parquet(str(root / "people"))
    spark.createDataFrame(table(seed=1)).write.parquet(str(root / "others"))
    return root


def digest(measurements) -> str:
    return content_hash(measurements.to_bytes())


def synthesizer(root, **kw) -> PrivSyn:
    return PrivSyn(Schema.from_dict(SCHEMA), epsilon=1.0, run_id="r1", runs_dir=str(root / "runs"), **kw)


def test_the_identity_is_the_plan_and_location_not_the_rows(spark, tables):
    people = str(tables / "people")
    same = frame_identity(spark.read.parquet(people))
    assert frame_identity(spark.read.parquet(people)) == same  # built again: new expression ids, same identity
    assert frame_identity(spark.read.parquet(people).where("n > 10")) != same
    assert frame_identity(spark.read.parquet(people).select("a", "n")) != same
    assert frame_identity(spark.read.parquet(str(tables / "others"))) != same  # same schema, another table
    # local data has no location: its identity is its columns and types, whatever its values
    assert frame_identity(spark.createDataFrame(table(seed=3))) == frame_identity(spark.createDataFrame(table(seed=4)))


def test_a_run_id_reused_with_another_dataframe_is_refused_unless_forced(spark, tables, tmp_path):
    people = str(tables / "people")
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "people", epsilon=10.0, delta=1e-6)
    synth = synthesizer(tmp_path, ledger=ledger, dataset_id="people")
    first = digest(synth.measure(spark.read.parquet(people)).measurements)
    spent = L.dataset_state(spark, ledger, "people").spent_rho

    again = digest(synth.measure(spark.read.parquet(people)).measurements)  # the same DataFrame built again: reused
    assert again == first

    with pytest.raises(UsageError) as refused:  # another filter: another input
        synth.measure(spark.read.parquet(people).where("n > 10"))
    message = str(refused.value)
    assert "\n" not in message and "run id 'r1' was measured with other settings: input 'DataFrame:" in message
    assert "use a new run id" in message and "reuse='force'" in message
    assert refused.value.exit_code == 2

    forced = digest(synth.measure(spark.read.parquet(people).where("n > 10"), reuse="force").measurements)
    assert forced == first
    assert L.dataset_state(spark, ledger, "people").spent_rho == spent  # one charge in all
    assert len([r for r in L.dataset_state(spark, ledger, "people").reservations if not r.refunded]) == 1

    with pytest.raises(UsageError, match="reuse must be one of"):
        synth.measure(spark.read.parquet(people), reuse="yes")


def test_without_a_ledger_the_runs_dir_artifact_is_bound_the_same_way(spark, tables, tmp_path):
    synth = synthesizer(tmp_path, no_ledger=True)
    first = digest(synth.measure(spark.read.parquet(str(tables / "people"))).measurements)
    with pytest.raises(UsageError, match="was measured with other settings: input"):
        synth.measure(spark.read.parquet(str(tables / "others")))
    forced = digest(synth.measure(spark.read.parquet(str(tables / "others")), reuse="force").measurements)
    assert forced == first
    # a later step reading only the measurements accepts them whatever they were measured on
    assert digest(synth.measured("r1", spark=spark).measurements) == first


def test_a_delta_input_that_moved_on_is_reused_with_a_warning(spark, tmp_path):
    delta = str(tmp_path / "delta_people")
    spark.createDataFrame(table()).write.format("delta").save(delta)
    synth = synthesizer(tmp_path, no_ledger=True)
    first = digest(synth.measure(delta).measurements)
    assert synth.measured("r1", spark=spark).measurements.provenance["fingerprint"]["input_delta_version"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleInputWarning)
        synth.measure(delta)  # the same version: no warning

    spark.createDataFrame(table(100, seed=5)).write.format("delta").mode("append").save(delta)
    with pytest.warns(StaleInputWarning, match=r"of version 0 of Delta table .*delta_people, which is now at "
                                               r"version 1; use a new run id to measure it"):
        again = digest(synth.measure(delta).measurements)
    assert again == first

    with pytest.raises(UsageError, match="input"):  # another location with the same run id is refused
        other = str(tmp_path / "other_delta")
        spark.read.format("delta").load(delta).write.format("delta").save(other)
        synth.measure(other)
