"""The person frame and the row frame against pandas brute force; one person's removal moves each measured
vector within its stated L2 sensitivity, on both counter backends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.measure.people_frames import people_frames
from privsyn_spark.privacy.people import degree_sensitivity, person_sensitivity, row_sensitivity
from privsyn_spark.schema.people import degree_bins, degree_label
from privsyn_spark.schema.schema import parse_schema
from tests.people_tables import PEOPLE, keyed_table, people_doc

SCHEMA = parse_schema(people_doc())
SPEC = SCHEMA.people


def pandas_persons(frame: pd.DataFrame) -> pd.DataFrame:
    """Brute force: per id the smallest value of each person column, the degree bin, the mode (ties: smallest)."""
    labels = {d: degree_label(lo, hi) for lo, hi in degree_bins(SPEC.max_rows_per_person) for d in range(lo, hi + 1)}
    out = []
    for key, rows in frame.groupby("customer_id"):
        person = {"customer_id": key, **{c: rows[c].min() for c in SPEC.person_columns},
                  "_degree": labels[min(len(rows), SPEC.max_rows_per_person)]}
        for c in SPEC.summaries:
            tally = rows[c].value_counts()
            person[f"_mode_{c}"] = min(tally[tally == tally.max()].index)
        out.append(person)
    return pd.DataFrame(out)


def test_frames_equal_pandas_and_the_tallies_are_counted(spark):
    frame = keyed_table(30, seed=1)
    with_nulls = pd.concat([frame, frame.head(2).assign(customer_id=None)], ignore_index=True)
    frames = people_frames(spark.createDataFrame(with_nulls), SCHEMA)
    persons = frames.persons.toPandas()  # the test's small table; a run never collects it
    expected = pandas_persons(frame)
    columns = [*SPEC.person_columns, "_degree", "_mode_channel"]
    assert list(persons.columns) == columns
    key = lambda df: df[columns].sort_values(columns).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(key(persons), key(expected))
    rows = frames.rows.toPandas()
    joined = frame.drop(columns=list(SPEC.person_columns)).merge(expected, on="customer_id")
    order = ["customer_id", "channel", "amount", *SPEC.person_columns, "_mode_channel", "_degree"]
    assert sorted(rows.columns) == sorted(order)
    pd.testing.assert_frame_equal(rows[order].sort_values(order).reset_index(drop=True),
                                  joined[order].sort_values(order).reset_index(drop=True))
    capped = frame.groupby("customer_id").size().clip(upper=SPEC.max_rows_per_person)
    np.testing.assert_array_equal(frames.degree_counts(),
                                  np.bincount(capped, minlength=SPEC.max_rows_per_person + 1)[1:])
    varies = frame.groupby("customer_id")["region"].nunique().gt(1).sum()
    stats = frames.stats()
    assert varies > 0 and stats["persons_not_constant"] == varies
    assert (stats["persons"], stats["null_id_rows"], stats["private"]) == (30, 2, False)
    assert stats["persons_above_max_rows"] == int((frame.groupby("customer_id").size() > 10).sum())


def test_a_numerical_summary_is_the_label_of_the_persons_most_frequent_bin(spark):
    schema = parse_schema(people_doc({**PEOPLE, "summaries": ["amount"]}))
    frame = keyed_table(30, seed=3)
    odd = frame.index % 5 == 0  # clipped to the edge bins as the encoder does; NaN and null left out
    frame.loc[odd, "amount"] = np.where(frame.index[odd] % 3 == 0, -7.0, np.where(frame.index[odd] % 3 == 1, 250.0,
                                                                                  np.nan))
    frame.loc[frame.index % 11 == 0, "amount"] = None
    persons = people_frames(spark.createDataFrame(frame), schema).persons.toPandas()  # small test table
    labels = ["[0, 25)", "[25, 50)", "[50, 75)", "[75, 100]"]
    expected = {}
    for key, rows in frame.groupby("customer_id"):
        bins = np.clip(np.floor(rows["amount"].dropna() / 25), 0, 3).astype(int)  # ties: the smallest bin
        tally = bins.value_counts()
        modal = labels[min(tally[tally == tally.max()].index)] if len(tally) else None
        expected[(str(rows["segment"].min()), str(rows["region"].min()), key)] = modal
    # persons carry no id: match them by (segment, region, mode) multisets
    got = sorted(map(str, zip(persons["segment"], persons["region"], persons["_mode_amount"])))
    assert got == sorted(map(str, ((s, r, m) for (s, r, _), m in expected.items())))
    assert persons["_mode_amount"].isna().sum() == sum(m is None for m in expected.values())


def measured(spark, frame: pd.DataFrame, backend: str, tmp_path, name: str) -> dict:
    """Every vector a people run measures, exactly: person-table and row-table 1- and 2-way marginals
    (the summaries are person attributes), and the degree histogram."""
    person_schema, row_schema = SCHEMA.people_tables()
    frames = people_frames(spark.createDataFrame(frame), SCHEMA)
    out = {}
    for part, df, schema in (("persons", frames.persons, person_schema), ("rows", frames.rows, row_schema)):
        with InputCodes(spark, df, None, schema, str(tmp_path / f"{name}-{part}")) as codes:
            packed = codes.packed()
            tables = count_marginals(packed, one_and_two_way(packed.domain), backend=backend).tables
            out.update({(part, m): t for m, t in tables.items()})
    out[("degrees", ("degree",))] = frames.degree_counts()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jvm", "arrow"])
def test_removing_one_person_moves_each_vector_within_its_sensitivity(spark, tmp_path, backend):
    k = SCHEMA.privacy_unit.bound
    frame = keyed_table(25, seed=2)
    sizes = frame.groupby("customer_id").size()
    frame = frame[frame.customer_id.map(sizes) <= k]  # the others keep all their rows: bounding takes no choice
    heavy = keyed_table(1, seed=5).head(1).assign(customer_id="REALID-heavy-XQZ")
    heavy = pd.concat([heavy] * 14, ignore_index=True)  # > M alike rows: capped in the degree, any K in the rows
    full = pd.concat([frame, heavy], ignore_index=True)
    light = frame.customer_id.iloc[0]
    bound = {"persons": person_sensitivity(), "degrees": degree_sensitivity(),
             "rows": row_sensitivity(SCHEMA.privacy_unit)}
    base = measured(spark, full, backend, tmp_path, "full")
    for removed in ("REALID-heavy-XQZ", light):
        neighbour = measured(spark, full[full.customer_id != removed], backend, tmp_path, removed)
        assert base.keys() == neighbour.keys()
        moved = {part: 0.0 for part in bound}
        for (part, m), table in base.items():
            change = float(np.linalg.norm((table - neighbour[(part, m)]).astype(float)))
            assert change <= bound[part] + 1e-9, (removed, part, m, change)
            moved[part] = max(moved[part], change)
        assert moved["persons"] == 1.0 and moved["degrees"] == 1.0  # one person row, one degree cell
        if removed != light:
            assert moved["rows"] == float(k)  # K rows of the same cells: the bound is attained
    assert base[("rows", ("_degree",))].sum() == len(frame) + k
