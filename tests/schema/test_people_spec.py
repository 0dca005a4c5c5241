"""The people declaration: parsed, checked against the schema before Spark starts, its degree bins."""

from __future__ import annotations

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.errors import UsageError
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.people import PeopleSpec, check_parent_child, degree_bins, degree_label
from privsyn_spark.schema.schema import parse_schema
from tests.people_tables import PARENT_CHILD, PEOPLE, people_doc

SEEN = {"name": "seen", "type": "numerical", "dtype": "date", "min": "2024-01-01", "max": "2024-12-31", "bins": 4}


def test_a_people_section_parses_round_trips_and_changes_the_hash():
    schema = parse_schema(people_doc())
    assert schema.people == PeopleSpec("customer_id", ("segment", "region"), 10, ("channel",))
    assert parse_schema(schema.to_document()) == schema
    flat = {k: v for k, v in people_doc().items() if k != "people"}
    assert parse_schema(flat).people is None
    assert parse_schema(flat).schema_hash() != schema.schema_hash()
    assert schema.people.derived == ("_degree", "_mode_channel")
    degree, mode = schema.people.derived_columns(schema.columns)
    assert degree.values == ("1", "2", "3", "4", "5-6", "7-8", "9-10") and degree.nulls == "none"
    assert (mode.name, mode.values) == ("_mode_channel", ("web", "shop"))


def test_a_numerical_summary_is_its_most_frequent_bin_as_a_category():
    schema = parse_schema(people_doc({**PEOPLE, "summaries": ["channel", "amount"]}))
    _, _, amount = schema.people.derived_columns(schema.columns)
    assert (amount.kind, amount.name, amount.dtype) == ("categorical", "_mode_amount", "string")
    assert amount.values == ("[0, 25)", "[25, 50)", "[50, 75)", "[75, 100]") and amount.nulls == "value"
    linked = parse_schema(people_doc({**PARENT_CHILD, "summaries": ["amount"]}))
    assert linked.people.derived_columns(linked.columns)[1].values == amount.values
    whole = {"name": "visits", "type": "numerical", "dtype": "int", "edges": [0, 2.5, 5, 10]}
    spiked = {"name": "paid", "type": "numerical", "dtype": "double", "edges": [0, 10, 100], "spikes": [0]}
    schema = parse_schema(people_doc({**PEOPLE, "summaries": ["visits", "paid"]}, extra_columns=(whole, spiked)))
    _, visits, paid = schema.people.derived_columns(schema.columns)
    assert visits.values == ("0-2", "3-4", "5-10")
    assert paid.values[0] == "0" and paid.values[-1] == "[10, 100]" and len(set(paid.values)) == 3


@pytest.mark.parametrize("people, unit, extra, message", [
    ({**PEOPLE, "id": "other_id"}, None, (), "people: id 'other_id' must be the privacy id"),
    (PEOPLE, {}, (), r"people: id 'customer_id' must be the privacy id .* no privacy unit .* declare privacy_unit"),
    ({**PEOPLE, "person_columns": ["segment", "zip"]}, None, (), "person column 'zip' is not a column the schema"),
    ({**PEOPLE, "person_columns": ["segment", "segment"]}, None, (), "person_columns lists 'segment' twice"),
    ({**PEOPLE, "summaries": ["region"]}, None, (), "'region' is listed as a person column and as a summary"),
    ({**PEOPLE, "summaries": ["seen"]}, None, (SEEN,), "summary 'seen' is a date column; a summary is a categorical"),
    ({**PEOPLE, "summaries": ["nope"]}, None, (), "summary 'nope' is not a column the schema declares"),
    ({**PEOPLE, "max_rows_per_person": 2}, None, (), r"max_rows_per_person \(M = 2\) must be >= .* \(K = 3\)"),
    ({**PEOPLE, "max_rows_per_person": 2.5}, None, (), "max_rows_per_person must be a whole number"),
    (PEOPLE, None, ({"name": "_degree", "type": "categorical", "values": ["x"]},), r"\['_degree'\] are reserved"),
    (PEOPLE, None, ({"name": "_mode_x", "type": "categorical", "values": ["x"]},), r"\['_mode_x'\] are reserved"),
    ({**PEOPLE, "key": 1}, None, (), r"people: unknown key\(s\) \['key'\]"),
    ({k: v for k, v in PEOPLE.items() if k != "max_rows_per_person"}, None, (),
     "people: 'max_rows_per_person' is required"),
])
def test_bad_declarations_are_one_line_schema_errors(people, unit, extra, message):
    with pytest.raises(SchemaError, match=message) as err:
        parse_schema(people_doc(people, unit, extra))
    assert "\n" not in str(err.value)


def test_privsyn_people_argument_is_checked_before_spark_and_any_budget():
    flat = {k: v for k, v in people_doc().items() if k != "people"}
    synth = PrivSyn(flat, epsilon=1.0, no_ledger=True, people=PEOPLE)
    assert synth.schema.people == PeopleSpec.from_document(PEOPLE)
    with pytest.raises(UsageError, match="max_rows_per_person .* must be >= "):
        PrivSyn(flat, epsilon=1.0, no_ledger=True, people={**PEOPLE, "max_rows_per_person": 1})
    with pytest.raises(UsageError, match="must be the privacy id"):  # a row unit: the people need the person unit
        PrivSyn({k: v for k, v in flat.items() if k != "privacy_unit"}, epsilon=1.0, no_ledger=True, people=PEOPLE)


@pytest.mark.parametrize("m", [1, 2, 4, 5, 7, 9, 16, 17, 50, 1000])
def test_degree_bins_cover_one_to_m_once_with_doubling_widths(m):
    bins = degree_bins(m)
    covered = [d for lo, hi in bins for d in range(lo, hi + 1)]
    assert covered == list(range(1, m + 1))
    widths = [hi - lo + 1 for lo, hi in bins[:-1]]  # every bin but the capped last one
    expected = [1, 1, 1, 1] + [w for k in range(1, 20) for w in (2 ** k, 2 ** k)]
    assert widths == expected[:len(widths)]
    assert degree_label(*bins[0]) == "1" and (len(bins) < 5 or degree_label(*bins[4]) in ("5-6", "5"))


def test_the_parent_child_form_parses_round_trips_and_has_a_degree_0_bin():
    schema = parse_schema(people_doc(PARENT_CHILD))
    spec = schema.people
    assert spec.parent_child and spec.foreign_key == "customer_ref" and spec.lowest_degree == 0
    assert parse_schema(schema.to_document()) == schema
    assert schema.schema_hash() != parse_schema(people_doc()).schema_hash()
    assert spec.bins == [(0, 0), *degree_bins(10)] and spec.degree_labels[:2] == ("0", "1")
    degree, mode = spec.derived_columns(schema.columns)
    assert degree.values[0] == "0" and mode.nulls == "value"  # a person of no rows has no most frequent value
    default = PeopleSpec.from_document({**PEOPLE, "form": "parent_child"})
    assert default.foreign_key == "customer_id"
    assert not parse_schema(people_doc()).people.parent_child and parse_schema(people_doc()).people.bins[0] == (1, 1)


@pytest.mark.parametrize("people, extra, message", [
    ({**PEOPLE, "foreign_key": "customer_ref"}, (), "foreign_key is the child table's column .* form: parent_child"),
    ({**PEOPLE, "form": "nested"}, (), r"form must be one of \['flat', 'parent_child'\]"),
    ({**PARENT_CHILD, "foreign_key": ""}, (), "foreign_key must be one column name"),
    (PARENT_CHILD, ({"name": "customer_ref", "type": "categorical", "values": ["x"]},),
     "foreign_key 'customer_ref' is a column the schema keeps"),
])
def test_bad_parent_child_declarations_are_one_line_schema_errors(people, extra, message):
    with pytest.raises(SchemaError, match=message) as err:
        parse_schema(people_doc(people, None, extra))
    assert "\n" not in str(err.value)


PARENT = ["customer_id", "segment", "region"]
CHILD = ["customer_ref", "channel", "amount"]


@pytest.mark.parametrize("parent, child, message", [
    (["segment", "region"], CHILD, "the parent table has no id column 'customer_id'"),
    (PARENT, ["customer_id", "channel", "amount"], "the child table has no foreign key column 'customer_ref'"),
    (["customer_id", "segment"], CHILD, "person column 'region' is not a column of the parent table"),
    (PARENT, [*CHILD, "region"], "column 'region' is in both .* lists it as a person column"),
    ([*PARENT, "amount"], CHILD, "column 'amount' is in both .* lists it as a row column"),
    (PARENT, ["customer_ref", "channel"], "row column 'amount' is not a column of the child table"),
])
def test_the_two_tables_columns_are_checked_each_a_one_line_error(parent, child, message):
    schema = parse_schema(people_doc(PARENT_CHILD))
    with pytest.raises(SchemaError, match=message) as err:
        check_parent_child(schema.people, schema.names, parent, child)
    assert "\n" not in str(err.value)
    check_parent_child(schema.people, schema.names, PARENT + ["extra"], CHILD + ["customer_id", "note"])
