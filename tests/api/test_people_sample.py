"""Synthetic people end to end: keys, constant person columns, two Delta tables, no real id anywhere."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from privsyn_spark import PeopleModel, PrivSyn, people_model, write_people
from privsyn_spark.synthesize.people_rows import deal_rows
from tests.people_tables import keyed_table, log_messages, people_doc

pytestmark = pytest.mark.slow

MARKS = ("REALID", "XQZ")
"""The pattern of every real id in :func:`keyed_table`: no output, log, report or property may hold it."""


def persisted(spark) -> set[int]:
    """The ids of the RDDs the session keeps in storage (cached, locally checkpointed)."""
    return {int(i) for i in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def files_holding_real_ids(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and any(m.encode() in p.read_bytes() for m in MARKS)]


@contextmanager
def local_checkpoints(spark):
    """No checkpoint folder on the SparkContext for the block (GUM then checkpoints locally, into storage),
    the session's own restored after: a test that ran before in this worker may have set one (a run's
    ``checkpoint_dir`` stays set on the context), and then every checkpoint is reliable and none is stored."""
    context = spark.sparkContext._jsc.sc()
    before = context.checkpointDir()
    getattr(context, "checkpointDir_$eq")(spark._jvm.scala.Option.apply(None))
    try:
        yield
    finally:
        getattr(context, "checkpointDir_$eq")(before)


@pytest.fixture(scope="module")
def people(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("people_sample")
    synth = PrivSyn(people_doc(), epsilon=8.0, no_ledger=True, run_id="ppl", runs_dir=str(root / "runs"))
    stored = persisted(spark)
    elsewhere = []  # what the session stores meanwhile for someone else (another thread of the notebook)

    def deal_beside_another_cache(*args, **kwargs):
        other = spark.sparkContext.parallelize(range(5)).persist()
        other.count()
        elsewhere.append(other)
        return deal_rows(*args, **kwargs)

    with log_messages() as records, pytest.MonkeyPatch.context() as patch, local_checkpoints(spark):
        patch.setattr(people_model, "deal_rows", deal_beside_another_cache)
        model = synth.fit(spark.createDataFrame(keyed_table(80, seed=4)))
        people = model.sample_people(n_people=60, seed=1)
        sampled = persisted(spark) - stored, len(people.cached), set(people.stored)
        versions = write_people(people, str(root / "persons"), str(root / "rows"), provenance=model)
    left = persisted(spark) - stored
    for other in elsewhere:
        other.unpersist()
    return root, model, people, versions, records, (sampled, left, {o.id() for o in elsewhere})


def test_write_people_releases_every_cache_and_checkpoint_of_the_people_path_and_nothing_else(people):
    _, _, found, _, _, (sampled, left, elsewhere) = people
    (kept, cached, checkpoints) = sampled
    assert cached == 3 and len(checkpoints) >= 2  # the persons, the pool's signatures, the back-off choice
    assert checkpoints <= kept and not checkpoints & elsewhere  # the local checkpoints both synthesizers read
    assert len(elsewhere) == 1 and left == elsewhere  # the other cache stays, none of the people path's does
    assert found.cached == () and found.stored == set()


def test_every_row_has_a_person_whose_columns_it_copies(spark, people):
    root, model, _, versions, _, _ = people
    assert isinstance(model, PeopleModel) and versions == (0, 0)  # one commit each
    persons = spark.read.format("delta").load(str(root / "persons")).toPandas()  # synthetic tables
    rows = spark.read.format("delta").load(str(root / "rows")).toPandas()
    assert list(persons.columns) == ["customer_id", "segment", "region"]
    assert list(rows.columns) == ["customer_id", "segment", "region", "channel", "amount"]
    assert len(persons) == 60 and persons.customer_id.is_unique
    assert persons.customer_id.str.fullmatch("[0-9a-f]{32}").all()
    assert set(rows.customer_id) <= set(persons.customer_id) and len(rows) >= len(persons)
    joined = rows.merge(persons, on="customer_id", suffixes=("", "_person"))
    assert len(joined) == len(rows)
    for c in ("segment", "region"):
        assert (joined[c] == joined[f"{c}_person"]).all()
        assert rows.groupby("customer_id")[c].nunique().max() == 1
    per_person = rows.groupby("customer_id").size()
    assert per_person.max() <= 10  # never more than M rows


def test_no_real_id_in_any_output_log_report_property_or_saved_model(spark, people):
    root, model, people_frames, _, records, _ = people
    for table in ("persons", "rows"):
        df = spark.read.format("delta").load(str(root / table))
        text = df.toPandas().astype(str).to_string()
        assert not any(m in text for m in MARKS)
        props = spark.sql(f"DESCRIBE DETAIL delta.`{root / table}`").first()["properties"]
        assert props["privsyn.people"] == "true" and not any(m in str(props) for m in MARKS)
    assert files_holding_real_ids(root) == []  # tables, Delta logs, run folder (artifact, state, report)
    assert records and not any(m in r for r in records for m in MARKS)
    saved = root / "saved"
    model.save(str(saved))
    assert files_holding_real_ids(saved) == []
    again = PrivSyn.load(str(saved))
    assert isinstance(again, PeopleModel) and again.measurements.to_bytes() == model.measurements.to_bytes()
    back = again.sample_people(n_people=5, seed=1)
    with back:
        assert back.persons.count() == 5 and set(back.rows.columns) == {"customer_id", *model.schema.names}
