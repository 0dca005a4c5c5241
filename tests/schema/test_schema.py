import json

import numpy as np
import pytest

from privsyn_spark.schema.columns import SchemaError, integer_bin_bounds
from privsyn_spark.schema.schema import load_schema, parse_schema, save_schema


def doc(*columns, **extra):
    return {"columns": list(columns), **extra}


@pytest.mark.parametrize("column, message", [
    ({"name": "a", "type": "text"}, "column 'a': unknown type 'text'"),
    ({"name": "a", "type": "categorical", "values": []}, "column 'a': categorical needs a non-empty"),
    ({"name": "a", "type": "categorical"}, "column 'a': categorical needs a non-empty"),
    ({"name": "a", "type": "numerical", "min": 5, "max": 5}, "column 'a': min (5) must be below max (5)"),
    ({"name": "a", "type": "numerical", "min": 9, "max": 1}, "column 'a': min (9) must be below max (1)"),
    ({"name": "a", "type": "numerical", "max": 1}, "column 'a': numerical needs public bounds"),
    ({"name": "a", "type": "numerical", "edges": [0, 3, 2]}, "column 'a': edges must be"),
    ({"name": "a", "type": "numerical", "dtype": "int", "edges": [0, 0.2, 0.4, 5]}, "column 'a': a bin holds no"),
    ({"name": "a", "type": "categorical", "values": [1, 2], "nulls": "skip"}, "column 'a': nulls must be one of"),
    ({"name": "a", "type": "categorical", "values": list(range(6000))}, "column 'a': 6002 codes is too many cells"),
])
def test_validation_errors_name_the_column_and_problem(column, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_schema(doc(column))


def test_codes_layout_and_domain():
    schema = parse_schema(doc(
        {"name": "c", "type": "categorical", "values": ["x", "y"]},
        {"name": "f", "type": "categorical", "values": ["x", "y"], "unseen": "fail", "nulls": "fail"},
        {"name": "n", "type": "numerical", "dtype": "double", "min": 0, "max": 1, "bins": 4},
        {"name": "id", "type": "drop"}))
    c, f, n = schema.columns
    assert (c.other_code, c.null_code, c.size) == (2, 3, 4)
    assert (f.other_code, f.null_code, f.size) == (None, None, 2)
    assert (n.null_code, n.size) == (4, 5)
    assert schema.domain().to_dict() == {"c": 4, "f": 2, "n": 5}
    assert schema.drop == ("id",)


def test_integer_bins_hold_whole_numbers_and_cover_the_bounds():
    schema = parse_schema(doc({"name": "a", "type": "numerical", "dtype": "int", "min": 1, "max": 16, "bins": 40}))
    lo, hi = integer_bin_bounds(schema.columns[0].edge_array())
    assert lo.tolist() == list(range(1, 17)) and hi.tolist() == list(range(1, 17))  # one bin per value
    schema = parse_schema(doc({"name": "a", "type": "numerical", "dtype": "int", "min": 17, "max": 90, "bins": 7}))
    lo, hi = integer_bin_bounds(schema.columns[0].edge_array())
    assert lo[0] == 17 and hi[-1] == 90 and np.all(lo[1:] == hi[:-1] + 1)


def test_dates_are_numerical_over_epoch_seconds():
    schema = parse_schema(doc({"name": "d", "type": "numerical", "dtype": "date", "min": "2020-01-01",
                               "max": "2020-12-31", "bins": 12}))
    assert schema.columns[0].edges[0] == pytest.approx(1577836800 - 0.5)


def test_round_trip_and_hash(tmp_path):
    schema = load_schema("privsyn_spark/sample/adult.schema.yaml")
    for name in ("s.yaml", "s.json"):
        save_schema(schema, tmp_path / name)
        again = load_schema(tmp_path / name)
        assert again == schema and again.schema_hash() == schema.schema_hash()
    changed = json.loads(json.dumps(schema.to_document()))
    changed["columns"][1]["values"].append("New-value")
    assert parse_schema(changed).schema_hash() != schema.schema_hash()


def test_missing_file_and_duplicate_columns(tmp_path):
    with pytest.raises(SchemaError, match="schema file not found"):
        load_schema(tmp_path / "nope.yaml")
    with pytest.raises(SchemaError, match="column 'a': declared twice"):
        parse_schema(doc({"name": "a", "type": "drop"}, {"name": "a", "type": "drop"}))


def num(**spec):
    return {"name": "x", "type": "numerical", **spec}


def cat(**spec):
    return {"name": "x", "type": "categorical", **spec}


@pytest.mark.parametrize("column, message", [
    (num(min=0, max=float("inf")), "column 'x': max must be finite, got inf"),
    (num(min=float("-inf"), max=1), "column 'x': min must be finite"),
    (num(min=float("nan"), max=1), "column 'x': min must be finite"),
    (num(edges=[0, 1, float("inf")]), "column 'x': edges must be finite"),
    (num(min=-1.7e308, max=1.7e308), "column 'x': max - min overflows"),
    (num(min="zero", max=5), "column 'x': min must be a finite number, got 'zero'"),
    (num(min="2020-01-01", max=5), "column 'x': min must be a finite number, got '2020-01-01'"),
    (num(dtype="date", min="soon", max="2020-01-01"), "column 'x': min must be a finite number or a date"),
    (num(min=0, max=5, bins=2.7), "column 'x': bins must be a whole number, got 2.7"),
    (num(min=0, max=5, bins="16"), "column 'x': bins must be a whole number, got '16'"),
    (num(min=0, max=5, bins=True), "column 'x': bins must be a whole number"),
    (num(min=0, max=5, bins=0), "column 'x': bins must be >= 1"),
    (num(edges="0,1,2"), "column 'x': edges must be a list"),
    (num(edges=[0, 1], min=0), "column 'x': give either 'edges' or 'min'"),
    (num(min=0, max=5, bin=4), r"column 'x': unknown key\(s\) \['bin'\]"),
    (cat(dtype="int", values=["A", "B", "C"]), "column 'x': value 'A' is not of dtype int"),
    (cat(dtype="int", values=[1, 2.5]), "column 'x': value 2.5 is not of dtype int"),
    (cat(dtype="int", values=[1, 2 ** 40]), "column 'x': value 1099511627776 is not of dtype int"),
    (cat(dtype="boolean", values=[True, "no"]), "column 'x': value 'no' is not of dtype boolean"),
    (cat(dtype="double", values=[1.0, float("nan")]), "column 'x': value nan is not a finite number"),
    (cat(values=["a", 1, 2]), r"column 'x': 'values' mix types \['int', 'str'\]"),
    (cat(values=["a", None]), "column 'x': 'values' mix types"),
    (cat(dtype="string", values=["a", None]), "column 'x': null is not a category"),
    (cat(dtype="string", values=[1, "1"]), "column 'x': 'values' has duplicates"),
    (cat(values=[1, 2], unseen="other", edges=[1]), r"column 'x': unknown key\(s\) \['edges'\]"),
])
def test_each_field_is_checked_against_its_dtype(column, message):
    with pytest.raises(SchemaError, match=message):
        parse_schema(doc(column))


@pytest.mark.parametrize("document, message", [
    (doc(cat(values=[1]), max_column_codes=2.5), "schema: max_column_codes must be a whole number"),
    (doc(cat(values=[1]), null_tokens="?"), "schema: null_tokens must be a list of strings"),
    (doc(cat(values=[1]), colums=[]), r"schema: unknown key\(s\) \['colums'\]"),
    (doc({"name": 3, "type": "drop"}), "schema: column names must be strings"),
])
def test_top_level_fields_are_checked(document, message):
    with pytest.raises(SchemaError, match=message):
        parse_schema(document)


def test_string_categories_read_numbers_as_text_and_integral_bins_are_accepted():
    schema = parse_schema(doc(cat(dtype="string", values=[10001, "10002"]),
                              {"name": "y", "type": "numerical", "min": 0, "max": 1, "bins": 4.0}))
    assert schema.column("x").values == ("10001", "10002")
    assert schema.column("y").size == 4 + 1


def test_spikes_get_bins_of_their_own_and_round_trip():
    schema = parse_schema(doc(
        {"name": "g", "type": "numerical", "dtype": "int", "edges": [0, 1, 2500, 5000, 99999],
         "spikes": [0, 3000, 99999]},
        {"name": "h", "type": "numerical", "dtype": "int", "min": 1, "max": 99, "bins": 10, "spikes": [40]},
        {"name": "x", "type": "numerical", "dtype": "double", "min": 0, "max": 10, "bins": 2, "spikes": [5]}))
    g, h, x = schema.columns
    lo, hi = integer_bin_bounds(g.edge_array())
    for code, value in g.spike_codes().items():
        assert lo[code] == hi[code] == value
    lo, hi = integer_bin_bounds(h.edge_array())
    assert [(lo[c], hi[c]) for c in h.spike_codes()] == [(40, 40)] and h.size == 12
    (code, value), = x.spike_codes().items()
    assert x.edges[code] == 5.0 and x.edges[code + 1] == np.nextafter(5.0, np.inf)
    assert parse_schema(schema.to_document()).schema_hash() == schema.schema_hash()


@pytest.mark.parametrize("spec, message", [
    ({"spikes": [120]}, "spikes: spike 120 is not a whole number inside"),
    ({"spikes": [2.5]}, "spikes: spike 2.5 is not a whole number inside"),
    ({"spikes": 3}, "spikes must be a list"),
    ({"nulls": "never"}, "nulls must be one of"),
])
def test_bad_spikes_and_nulls_are_refused(spec, message):
    with pytest.raises(SchemaError, match=message):
        parse_schema(doc({"name": "a", "type": "numerical", "dtype": "int", "min": 0, "max": 99, **spec}))
