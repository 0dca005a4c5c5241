"""A people run: three measurements under one ledger reservation and one accountant, in one artifact."""

from __future__ import annotations

import math

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.budget import ledger as L
from privsyn_spark.errors import UsageError
from privsyn_spark.people_model import PeopleModel
from privsyn_spark.privacy.measurements import Measurements, content_hash
from privsyn_spark.privacy.people import PeopleSplit
from tests.people_tables import PARENT_CHILD, keyed_table, parent_child, people_doc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def people_fit(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("people")
    ledger = str(root / "ledger")
    L.set_budget(spark, ledger, "shop", epsilon=10.0, delta=1e-9, privacy_unit="customer_id")
    synth = PrivSyn(people_doc(), epsilon=4.0, delta=1e-9, ledger=ledger, dataset_id="shop", run_id="people1",
                    runs_dir=str(root / "runs"))
    frame = keyed_table(60, seed=3)
    model = synth.measure_people(spark.createDataFrame(frame))
    return root, ledger, synth, model, frame


def test_one_reservation_one_accountant_one_hash_checked_artifact(spark, people_fit):
    root, ledger, synth, model, frame = people_fit
    assert isinstance(model, PeopleModel)
    state = L.dataset_state(spark, ledger, "shop")
    held = state.active("people1")
    assert [r.run_id for r in state.reservations if not r.refunded] == ["people1"]  # one reservation row
    assert held.rho == synth.budget.rho and state.spent_rho == synth.budget.rho
    m = model.measurements
    assert math.fsum(e["rho"] for e in m.ledger) == pytest.approx(synth.budget.rho, rel=1e-12)
    parts = {name: math.fsum(e["rho"] for e in m.ledger if e["name"].split("/")[0] == name)
             for name in ("persons", "degrees", "rows")}
    for name, rho in PeopleSplit().rhos(synth.budget.rho).items():
        assert parts[name] == pytest.approx(rho, rel=1e-12)
    assert {e["sensitivity"] for e in m.ledger if e["name"].startswith("persons/one_way")} == {1.0}
    assert {e["sensitivity"] for e in m.ledger if e["name"].startswith("rows/one_way")} == {3.0}
    degrees = next(e for e in m.ledger if e["name"] == "degrees")
    assert (degrees["sensitivity"], degrees["cells"]) == (1.0, 10)
    data = (root / "runs" / "people1" / "measurements" / "measurements.npz").read_bytes()
    assert content_hash(data) == held.artifact_sha256
    again = Measurements.from_bytes(data)  # the nested person table and the histogram survive the round trip
    assert again.persons is not None and again.persons.domain == m.persons.domain
    assert list(again.degrees.values) == list(m.degrees.values) and len(m.degrees.values) == 10
    assert set(m.persons.domain.attrs) == {"segment", "region", "_degree", "_mode_channel"}
    assert {"channel", "amount", "_degree"} <= set(m.domain.attrs)
    stats = model.record.bounding["people"]
    assert stats["private"] is False and stats["persons"] == 60


def test_a_second_fit_reuses_the_artifact_and_charges_nothing(spark, people_fit):
    root, ledger, synth, model, frame = people_fit
    rows = L.read_ledger(spark, ledger, "shop").count()
    again = synth.measure_people(spark.createDataFrame(frame))
    assert L.read_ledger(spark, ledger, "shop").count() == rows
    assert again.measurements.to_bytes() == model.measurements.to_bytes()


def test_measure_refuses_a_people_schema_and_measure_people_a_flat_one():
    synth = PrivSyn(people_doc(), epsilon=1.0, no_ledger=True)
    with pytest.raises(UsageError, match="measure_people"):
        synth.measure("anything")
    flat = PrivSyn({k: v for k, v in people_doc().items() if k != "people"}, epsilon=1.0, no_ledger=True)
    with pytest.raises(UsageError, match="people: section"):
        flat.measure_people("anything")


def counted(spark, frame):
    """``frame`` as a DataFrame whose every scan adds its rows to the returned accumulator."""
    seen = spark.sparkContext.accumulator(0)

    def count(batches):
        for batch in batches:
            seen.add(batch.num_rows)
            yield batch

    df = spark.createDataFrame(frame)
    return df.mapInArrow(count, df.schema), seen


def test_a_people_fit_scans_each_input_once_as_a_flat_fit_does(spark, tmp_path):
    frame = keyed_table(40, seed=2)
    flat_doc = {k: v for k, v in people_doc().items() if k != "people"}
    flat, flat_seen = counted(spark, frame)
    PrivSyn(flat_doc, epsilon=4.0, no_ledger=True, runs_dir=str(tmp_path / "flat")).fit(flat)
    keyed, keyed_seen = counted(spark, frame)
    PrivSyn(people_doc(), epsilon=4.0, no_ledger=True, runs_dir=str(tmp_path / "people")).fit(keyed)
    parents, child = parent_child(frame)
    (parent_df, parents_seen), (child_df, child_seen) = counted(spark, parents), counted(spark, child)
    PrivSyn(people_doc(PARENT_CHILD), epsilon=4.0, no_ledger=True, runs_dir=str(tmp_path / "linked")).fit(
        child_df, parents=parent_df)
    assert flat_seen.value == keyed_seen.value == len(frame)  # one scan (two before the frames shared one)
    assert (parents_seen.value, child_seen.value) == (len(parents), len(child))
