"""The people declaration: parsed, checked against the schema before Spark starts, its degree bins."""

from __future__ import annotations

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.errors import UsageError
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.people import PeopleSpec, degree_bins, degree_label
from privsyn_spark.schema.schema import parse_schema
from tests.people_tables import PEOPLE, people_doc


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


@pytest.mark.parametrize("people, unit, extra, message", [
    ({**PEOPLE, "id": "other_id"}, None, (), "people: id 'other_id' must be the privacy id"),
    (PEOPLE, {}, (), r"people: id 'customer_id' must be the privacy id .* no privacy unit .* declare privacy_unit"),
    ({**PEOPLE, "person_columns": ["segment", "zip"]}, None, (), "person column 'zip' is not a column the schema"),
    ({**PEOPLE, "person_columns": ["segment", "segment"]}, None, (), "person_columns lists 'segment' twice"),
    ({**PEOPLE, "summaries": ["region"]}, None, (), "'region' is listed as a person column and as a summary"),
    ({**PEOPLE, "summaries": ["amount"]}, None, (), "summary 'amount' is not a categorical column"),
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
