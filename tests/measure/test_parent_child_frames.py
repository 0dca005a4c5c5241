"""The parent-child form's person frame and row frame against pandas brute force and against the flat form
of the same people; one parent's removal with all its child rows moves each measured vector within its
stated L2 sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.measure.people_frames import linked_table, people_frames
from privsyn_spark.privacy.accounting import RunBudget
from privsyn_spark.privacy.noise import SecureDiscreteGaussian, seeded_noise_for_tests_only
from privsyn_spark.privacy.people import degree_sensitivity, person_sensitivity, row_sensitivity
from privsyn_spark.release.measure_people import measure_people
from privsyn_spark.run_record import RunRecord
from privsyn_spark.sample.keyed_people import SCHEMA_PATH, keyed_people, keyed_people_tables
from privsyn_spark.schema.people import degree_label
from privsyn_spark.schema.schema import Schema, parse_schema
from tests.people_tables import PARENT_CHILD, awkward_parent_child, people_doc

SCHEMA = parse_schema(people_doc(PARENT_CHILD))
SPEC = SCHEMA.people


def frames_of(spark, parents: pd.DataFrame, child: pd.DataFrame, schema=SCHEMA):
    linked = linked_table(spark.createDataFrame(parents), spark.createDataFrame(child), schema.people)
    return people_frames(linked, schema)


def pandas_frames(parents: pd.DataFrame, child: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Brute force: a person per non-null parent id (its smallest person values), its degree bin over the child
    rows whose key names it (0 for none), the mode of channel (ties: smallest; none: null); the rows of a
    parent with the person's attributes."""
    labels = {d: degree_label(lo, hi) for lo, hi in SPEC.bins for d in range(lo, hi + 1)}
    persons = []
    for key, own in parents.dropna(subset=["customer_id"]).groupby("customer_id"):
        rows = child[child.customer_ref == key]
        tally = rows.channel.value_counts()
        persons.append({"customer_id": key, "segment": own.segment.min(), "region": own.region.min(),
                        "_degree": labels[min(len(rows), SPEC.max_rows_per_person)],
                        "_mode_channel": min(tally[tally == tally.max()].index) if len(rows) else None})
    expected = pd.DataFrame(persons)
    rows = child.merge(expected, left_on="customer_ref", right_on="customer_id").drop(columns="customer_ref")
    return expected, rows


def test_linked_frames_equal_pandas_and_duplicates_orphans_and_null_keys_are_counted(spark):
    parents, child = awkward_parent_child()
    frames = frames_of(spark, parents, child)
    persons = frames.persons.toPandas()  # the test's small table; a run never collects it
    expected, joined = pandas_frames(parents, child)
    columns = ["segment", "region", "_degree", "_mode_channel"]
    assert list(persons.columns) == columns
    key = lambda df: df[columns].fillna("null").sort_values(columns).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(key(persons), key(expected))
    assert "0" in set(persons._degree)  # the parent with no child rows is a person of degree 0
    rows = frames.rows.toPandas()
    order = ["customer_id", "channel", "amount", "segment", "region", "_mode_channel", "_degree"]
    assert sorted(rows.columns) == sorted(order)
    pd.testing.assert_frame_equal(rows[order].sort_values(order).reset_index(drop=True),
                                  joined[order].sort_values(order).reset_index(drop=True))
    linked = child[child.customer_ref.isin(parents.customer_id.dropna())]
    degrees = linked.groupby("customer_ref").size().reindex(parents.customer_id.dropna().unique(), fill_value=0)
    np.testing.assert_array_equal(frames.degree_counts(),
                                  np.bincount(degrees.clip(upper=10), minlength=SPEC.max_rows_per_person + 1))
    stats = frames.stats()
    known = set(parents.customer_id.dropna())
    assert stats == {**stats, "private": False, "persons": len(known), "duplicate_parent_ids": 1,
                     "null_id_parents": int(parents.customer_id.isna().sum()),
                     "orphan_rows": int((child.customer_ref.notna() & ~child.customer_ref.isin(known)).sum()),
                     "null_id_rows": int(child.customer_ref.isna().sum()), "persons_above_max_rows": 1}
    assert (stats["orphan_rows"], stats["null_id_rows"], stats["null_id_parents"]) == (2, 1, 1)


def test_the_generators_two_forms_give_the_same_frames(spark):
    flat_schema = Schema.load(SCHEMA_PATH)
    spec = flat_schema.people
    linked_schema = parse_schema({**flat_schema.to_document(), "people": {**spec.to_document(),
                                                                           "form": "parent_child"}})
    linked_spec = linked_schema.people
    flat = people_frames(keyed_people(spark, people=25, seed=2), flat_schema)
    persons, orders = keyed_people_tables(spark, people=25, seed=2)
    linked = people_frames(linked_table(persons, orders, linked_spec), linked_schema)
    for a, b in ((flat.persons, linked.persons), (flat.rows, linked.rows)):
        columns = sorted(a.columns)
        assert columns == sorted(b.columns)
        pd.testing.assert_frame_equal(a.toPandas()[columns].sort_values(columns).reset_index(drop=True),
                                      b.toPandas()[columns].sort_values(columns).reset_index(drop=True))
    counts = linked.degree_counts()
    assert counts[0] == 0 and counts.size == spec.max_rows_per_person + 1  # every generated person has a row
    np.testing.assert_array_equal(counts[1:], flat.degree_counts())
    assert linked.stats()["duplicate_parent_ids"] == 0 and linked.stats()["orphan_rows"] == 0


def measured(spark, parents: pd.DataFrame, child: pd.DataFrame, tmp_path, name: str) -> dict:
    """Every vector a parent-child people run measures, exactly: the person and row tables' 1- and 2-way
    marginals and the degree histogram over 0..M."""
    person_schema, row_schema = SCHEMA.people_tables()
    frames = frames_of(spark, parents, child)
    out = {}
    for part, df, schema in (("persons", frames.persons, person_schema), ("rows", frames.rows, row_schema)):
        with InputCodes(spark, df, None, schema, str(tmp_path / f"{name}-{part}")) as codes:
            packed = codes.packed()
            tables = count_marginals(packed, one_and_two_way(packed.domain), backend="jvm").tables
            out.update({(part, m): t for m, t in tables.items()})
    out[("degrees", ("degree",))] = frames.degree_counts()
    return out


@pytest.mark.slow
def test_removing_one_parent_with_its_rows_moves_each_vector_within_its_sensitivity(spark, tmp_path):
    k = SCHEMA.privacy_unit.bound
    parents, child = awkward_parent_child()
    child = child[child.customer_ref != "REALID-2-XQZ"]  # at most K rows a parent: bounding takes no choice
    heavy = child[child.customer_ref == "REALID-0-XQZ"].assign(customer_ref="REALID-2-XQZ").head(1)
    child = pd.concat([child, pd.concat([heavy] * 14)], ignore_index=True)  # > M alike rows: K in the rows
    bound = {"persons": person_sensitivity(), "degrees": degree_sensitivity(),
             "rows": row_sensitivity(SCHEMA.privacy_unit)}
    base = measured(spark, parents, child, tmp_path, "full")
    for removed in ("REALID-2-XQZ", "REALID-5-XQZ", "REALID-1-XQZ"):  # heavy, no child rows, a duplicate id
        neighbour = measured(spark, parents[parents.customer_id != removed], child[child.customer_ref != removed],
                             tmp_path, removed)
        moved = {part: 0.0 for part in bound}
        for (part, m), table in base.items():
            change = float(np.linalg.norm((table - neighbour[(part, m)]).astype(float)))
            assert change <= bound[part] + 1e-9, (removed, part, m, change)
            moved[part] = max(moved[part], change)
        assert moved["persons"] == 1.0 and moved["degrees"] == 1.0  # one person row, one degree cell
        assert moved["rows"] == {"REALID-2-XQZ": float(k), "REALID-5-XQZ": 0.0}.get(removed, moved["rows"])


@pytest.mark.slow
def test_the_generators_two_forms_give_the_same_noisy_measurements_under_seeded_noise(spark, tmp_path):
    """The flat form's frames, encoded in the parent-child form's tables (its ``_degree`` domain has the bin
    ``0``, which no generated person uses), and the parent-child form's frames give the same artifact (at most
    K rows a person: the bounding to K keeps every row, no random choice)."""
    flat_schema = Schema.load(SCHEMA_PATH)
    linked_schema = parse_schema({**flat_schema.to_document(), "people": {**flat_schema.people.to_document(),
                                                                           "form": "parent_child"}})
    k = flat_schema.privacy_unit.bound
    persons, orders = keyed_people_tables(spark, people=25, seed=2, max_rows=k)
    both = {"flat": (people_frames(keyed_people(spark, people=25, seed=2, max_rows=k), flat_schema), True),
            "linked": (people_frames(linked_table(persons, orders, linked_schema.people), linked_schema),
                       False)}
    tables = linked_schema.people_tables()
    budget = RunBudget.of(4.0, 1e-9)
    artifacts = {}
    for name, (frames, pad) in both.items():
        codes = [InputCodes(spark, df, None, table, str(tmp_path / f"{name}-{part}"))
                 for df, table, part in zip((frames.persons, frames.rows), tables, ("persons", "rows"))]
        def counts(f=frames, p=pad):
            return np.concatenate([[0] * p, f.degree_counts()]).astype(np.int64)

        with seeded_noise_for_tests_only(7):
            artifacts[name] = measure_people(codes[0].packed, codes[1].packed, counts, run_id="same",
                                             schema_hashes=(tables[0].schema_hash(), tables[1].schema_hash()),
                                             budget=budget, sampler=SecureDiscreteGaussian(), record=RunRecord(),
                                             unit=linked_schema.privacy_unit)
        for c in codes:
            c.close()
    assert artifacts["flat"].to_bytes() == artifacts["linked"].to_bytes()
    assert len(artifacts["linked"].degrees.values) == 101
