"""`sample --model` of a saved people model: new persons and their rows, fresh keys, nothing read or charged."""

from __future__ import annotations

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.cli.resample import SampleConfig, run_sample
from privsyn_spark.errors import UsageError
from tests.people_tables import keyed_table, people_doc

pytestmark = pytest.mark.slow


def test_sample_of_a_saved_people_model_writes_persons_and_rows(spark, tmp_path):
    synth = PrivSyn(people_doc(), epsilon=8.0, no_ledger=True, run_id="saved", runs_dir=str(tmp_path / "runs"))
    model = synth.fit(spark.createDataFrame(keyed_table(40, seed=8)))
    model.save(str(tmp_path / "model"))
    with pytest.raises(UsageError, match="--persons-output"):
        run_sample(spark, SampleConfig(output=str(tmp_path / "rows"), model=str(tmp_path / "model")))
    version = run_sample(spark, SampleConfig(output=str(tmp_path / "rows"), model=str(tmp_path / "model"),
                                             persons_output=str(tmp_path / "persons"), people=7, seed=2))
    persons = spark.read.format("delta").load(str(tmp_path / "persons")).toPandas()  # synthetic tables
    rows = spark.read.format("delta").load(str(tmp_path / "rows")).toPandas()
    assert version == 0 and len(persons) == 7 and persons.customer_id.is_unique
    assert set(rows.customer_id) <= set(persons.customer_id) and len(rows) >= 7
    props = spark.sql(f"DESCRIBE DETAIL delta.`{tmp_path / 'rows'}`").first()["properties"]
    assert (props["privsyn.mode"], props["privsyn.resampled_from"], props["privsyn.people"]) == (
        "resample", "saved", "true")
