"""The parent-child form end to end through the API: a parent table and a child table measured under one
reservation into one artifact; persons of degree 0 sampled with no rows; no real id anywhere; each bad
declaration of the two tables refused in one line before any ledger record."""

from __future__ import annotations

import pandas as pd
import pytest

from privsyn_spark import PeopleModel, PrivSyn, write_people
from privsyn_spark.budget import ledger as L
from privsyn_spark.errors import UsageError
from tests.api.test_people_sample import MARKS, files_holding_real_ids
from tests.people_tables import PARENT_CHILD, awkward_parent_child, keyed_table, log_messages, parent_child, people_doc

pytestmark = pytest.mark.slow
ZERO = 30
"""Parents with no child rows in :func:`tables`."""


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """60 persons with rows, ZERO parents without, and the awkward cases (a duplicate id, orphans, null keys)."""
    parents, child = parent_child(keyed_table(60, seed=3))
    idle = pd.DataFrame({"customer_id": [f"REALID-idle{i}-XQZ" for i in range(ZERO)], "segment": "a", "region": "s"})
    odd_parents, odd_child = awkward_parent_child()
    odd_parents = odd_parents.assign(customer_id=odd_parents.customer_id.str.replace("REALID-", "REALID-odd"))
    odd_child = odd_child.assign(customer_ref=odd_child.customer_ref.str.replace("REALID-", "REALID-odd"))
    return pd.concat([parents, idle, odd_parents], ignore_index=True), pd.concat([child, odd_child], ignore_index=True)


@pytest.fixture(scope="module")
def fitted(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("parent_child")
    ledger = str(root / "ledger")
    L.set_budget(spark, ledger, "shop", epsilon=10.0, delta=1e-9, privacy_unit="customer_id")
    synth = PrivSyn(people_doc(PARENT_CHILD), epsilon=8.0, delta=1e-9, ledger=ledger, dataset_id="shop",
                    run_id="pc1", runs_dir=str(root / "runs"))
    parents, child = tables()
    with log_messages() as records:
        model = synth.fit(spark.createDataFrame(child), parents=spark.createDataFrame(parents))
        people = model.sample_people(n_people=200, seed=1)
        write_people(people, str(root / "persons"), str(root / "rows"), provenance=model)
    return root, ledger, synth, model, parents, child, records


def test_one_reservation_one_artifact_a_degree_0_cell_and_the_counted_handling(spark, fitted):
    root, ledger, synth, model, parents, child, _ = fitted
    assert isinstance(model, PeopleModel)
    state = L.dataset_state(spark, ledger, "shop")
    assert [r.run_id for r in state.reservations if not r.refunded] == ["pc1"] and state.spent_rho == synth.budget.rho
    m = model.measurements
    degrees = next(e for e in m.ledger if e["name"] == "degrees")
    assert (degrees["sensitivity"], degrees["cells"]) == (1.0, 11) and len(m.degrees.values) == 11  # 0..M
    assert {e["sensitivity"] for e in m.ledger if e["name"].startswith("persons/one_way")} == {1.0}
    assert {e["sensitivity"] for e in m.ledger if e["name"].startswith("rows/one_way")} == {3.0}
    assert model.persons.schema.column("_degree").values[:2] == ("0", "1")  # a bin of its own for degree 0
    known = set(parents.customer_id.dropna())
    stats = model.record.bounding["people"]
    assert stats["private"] is False and stats["persons"] == len(known)
    assert (stats["duplicate_parent_ids"], stats["orphan_rows"], stats["null_id_rows"], stats["null_id_parents"]) \
        == (int(parents.customer_id.dropna().duplicated().sum()),
            int((child.customer_ref.notna() & ~child.customer_ref.isin(known)).sum()),
            int(child.customer_ref.isna().sum()), int(parents.customer_id.isna().sum())) == (1, 2, 1, 1)


def test_rows_belong_to_persons_copy_their_columns_and_degree_0_persons_have_none(spark, fitted):
    root = fitted[0]
    persons = spark.read.format("delta").load(str(root / "persons")).toPandas()  # synthetic tables
    rows = spark.read.format("delta").load(str(root / "rows")).toPandas()
    assert len(persons) == 200 and persons.customer_id.is_unique
    assert list(rows.columns) == ["customer_id", "segment", "region", "channel", "amount"]
    assert set(rows.customer_id) <= set(persons.customer_id)
    joined = rows.merge(persons, on="customer_id", suffixes=("", "_person"))
    assert len(joined) == len(rows)
    for c in ("segment", "region"):
        assert (joined[c] == joined[f"{c}_person"]).all()
    without = 1 - rows.customer_id.nunique() / len(persons)  # real share: 31 of 97 parents have no rows
    assert 0 < without < 0.6  # persons of the bin "0" take no rows (every person of a bin 1.. takes some)


def test_no_real_id_in_any_output_log_or_run_file(spark, fitted):
    root, *_, records = fitted
    assert files_holding_real_ids(root) == []  # tables, Delta logs, run folder (artifact, state, report)
    assert records and not any(m in r for r in records for m in MARKS)


def test_bad_declarations_are_one_line_before_any_ledger_record(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "bad", epsilon=10.0, delta=1e-9, privacy_unit="customer_id")
    before = L.read_ledger(spark, ledger, "bad").count()
    parents, child = (spark.createDataFrame(t) for t in awkward_parent_child())
    cases = [
        (PARENT_CHILD, child.withColumnRenamed("customer_ref", "cust"), parents, "no foreign key column"),
        (PARENT_CHILD, child, parents.drop("region"), "person column 'region' is not a column of the parent"),
        (PARENT_CHILD, child.withColumn("region", child.channel), parents, "'region' is in both"),
        (PARENT_CHILD, child, None, "form: parent_child: pass the parent table"),
        (None, child.withColumnRenamed("customer_ref", "customer_id"), parents, "needs a people section with form"),
    ]
    for people, data, given, message in cases:
        synth = PrivSyn(people_doc(people), epsilon=1.0, delta=1e-9, ledger=ledger, dataset_id="bad", run_id="b1",
                        runs_dir=str(tmp_path / "runs"))
        with pytest.raises(UsageError, match=message) as err:
            synth.fit(data, parents=given)
        assert "\n" not in str(err.value) and "REALID" not in str(err.value)
    assert L.read_ledger(spark, ledger, "bad").count() == before
    assert not L.dataset_state(spark, ledger, "bad").reservations
