"""Declared rules in the schema: validation (one-line errors), the synthesis view they make."""

import itertools

import pytest

from privsyn_spark import SAMPLE_SCHEMA
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import load_schema, parse_schema

COLUMNS = [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "b", "type": "numerical", "dtype": "int", "min": 1, "max": 9, "bins": 9},
    {"name": "c", "type": "categorical", "values": ["p", "q"], "unseen": "fail", "nulls": "none"},
    {"name": "d", "type": "categorical", "values": ["lo", "hi"]},
    {"name": "s", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 10},
    {"name": "e", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 4},
    {"name": "t", "type": "categorical", "values": ["r", "s"], "unseen": "fail", "nulls": "none"},
]
DERIVE_B = {"type": "derived_from", "column": "b", "source": "a", "mapping": {"x": 1, "y": 5, "z": 9}}


def schema(*rules, columns=COLUMNS):
    return parse_schema({"columns": columns, "rules": list(rules)})


@pytest.mark.parametrize("rule, message", [
    ({"type": "implies", "if": {"nope": "x"}, "then": {"c": "p"}},
     r"rules\[0\] \(implies\): 'nope' is not a kept column"),
    ({"type": "implies", "if": {"a": "w"}, "then": {"c": "p"}},
     r"rules\[0\]: 'w' is not a declared value of column 'a'"),
    ({"type": "implies", "if": {"a": "x"}, "then": {"a": "y"}}, r"column 'a' is in both 'if' and 'then'"),
    ({"type": "implies", "if": {"b": 1}, "then": {"c": "p"}}, r"column 'b' is numerical; this rule names categorical"),
    ({"type": "forbid", "cells": {"a": "x"}, "extra": 1}, r"rules\[0\] \(forbid\): unknown key\(s\) \['extra'\]"),
    ({"type": "implies", "if": {"a": "x"}}, r"rules\[0\] \(implies\): needs \['then'\]"),
    ({"type": "unique", "columns": ["a"]}, r"rules\[0\]: type must be one of"),
    ({"type": "combinations", "columns": ["a", "c"], "allowed": [["x"]]}, r"every allowed combination lists 2 values"),
    ({"type": "inequality", "low": "a", "high": "s"}, r"inequality columns must be numerical, 'a' is categorical"),
    ({"type": "inequality", "low": "s", "high": "s"}, r"inequality needs two different columns"),
    ({**DERIVE_B, "mapping": {"x": 1, "y": 5}}, r"the mapping does not cover the source's values \['z'\]"),
    ({**DERIVE_B, "mapping": {"x": 1, "y": 5, "z": 9, "w": 2}}, r"mapping key\(s\) \['w'\] are not declared"),
    ({**DERIVE_B, "mapping": {"x": 1, "y": 5, "z": 10}}, r"10 is not a whole number inside \[0.5, 9.5\] of 'b'"),
    ({**DERIVE_B, "source": "b"}, r"column 'b' cannot be derived from itself"),
    ({**DERIVE_B, "source": "s"}, r"the source 's' must be categorical"),
    ({"type": "derived_from", "column": "c", "source": "a", "mapping": {"x": "p", "y": "q", "z": "p"}},
     r"'a' can be null or 'other' \(a null 'c' then\), but 'c' has no null value"),
])
def test_a_bad_rule_is_a_one_line_error_naming_it(rule, message):
    with pytest.raises(SchemaError, match=message) as err:
        schema(rule)
    assert "\n" not in str(err.value)


def test_cycles_double_derivations_and_empty_groups_are_refused():
    back = {"type": "derived_from", "column": "d", "source": "t", "mapping": {"r": "lo", "s": "hi"}}
    forth = {"type": "derived_from", "column": "t", "source": "d", "mapping": {"lo": "r", "hi": "s"}}
    cols = [*COLUMNS[:3], {**COLUMNS[3], "unseen": "fail", "nulls": "none"}, *COLUMNS[4:]]
    with pytest.raises(SchemaError, match="derived_from has a cycle: (d -> t -> d|t -> d -> t)"):
        schema(back, forth, columns=cols)
    with pytest.raises(SchemaError, match="column 'b' is derived twice"):
        schema(DERIVE_B, DERIVE_B)
    with pytest.raises(SchemaError, match="no combination of values is allowed"):
        schema({"type": "forbid", "cells": {"c": "p"}}, {"type": "forbid", "cells": {"c": "q"}})
    with pytest.raises(SchemaError, match="an inequality cannot name a derived column"):
        schema(DERIVE_B, {"type": "inequality", "low": "b", "high": "s"})


def test_without_rules_the_view_and_the_hash_are_the_schemas_own():
    plain = parse_schema({"columns": COLUMNS})
    assert plain.view.columns == plain.columns and plain.view.domain() == plain.domain()
    assert "rules" not in plain.to_document()
    assert parse_schema({"columns": COLUMNS, "rules": []}).schema_hash() == plain.schema_hash()
    ruled = schema(DERIVE_B)
    assert ruled.schema_hash() != plain.schema_hash()
    assert parse_schema(ruled.to_document()) == ruled


def test_bundled_schema_derives_education_num_and_pairs_relationship_with_gender():
    s = load_schema(SAMPLE_SCHEMA)
    view = s.view
    assert "educational-num" not in view.names and "education" in view.names  # generated, never measured
    (compound,) = view.compounds
    assert compound.members == ("relationship", "gender")
    rel, gen = s.column("relationship"), s.column("gender")
    pairs = {(rel.labels()[r], gen.labels()[g]) for r, g in compound.cells}
    assert ("Husband", "Female") not in pairs and ("Wife", "Male") not in pairs and ("Husband", None) not in pairs
    assert ("Husband", "Male") in pairs and ("Own-child", "Female") in pairs and (None, None) in pairs
    assert compound.size == rel.size * gen.size - 6  # Husband and Wife: one gender each of 4 codes
    # an input row breaking a rule: counted (status 1), kept as the allowed cell with the same relationship
    lut = compound.lut.reshape(rel.size, gen.size)
    husband, wife, female, male = rel.values.index("Husband"), rel.values.index("Wife"), 0, 1
    assert lut[husband, female] & 3 == 1 and tuple(compound.cells[lut[husband, female] >> 2]) == (husband, male)
    assert lut[wife, male] & 3 == 1 and tuple(compound.cells[lut[wife, male] >> 2]) == (wife, female)
    assert lut[husband, male] & 3 == 0
    edu = s.column("education")
    (derivation,) = view.derivations
    assert [derivation.values[edu.values.index(v)] for v in ("Preschool", "HS-grad", "Doctorate")] == [1, 9, 16]
    assert s.column("hours-per-week").spikes == (40.0,)


def test_masks_of_each_rule_type_brute_force():
    s = schema({"type": "implies", "if": {"a": ["x", "y"]}, "then": {"c": "q"}},
               {"type": "combinations", "columns": ["d", "t"], "allowed": [["lo", "r"], ["hi", "s"], ["hi", "r"]]},
               {"type": "inequality", "low": "s", "high": "e"})
    cols = {c.name: c for c in s.columns}
    imp, comb, ineq = s.rules
    a_labels, c_labels = cols["a"].labels(), cols["c"].labels()
    for i, j in itertools.product(range(cols["a"].size), range(cols["c"].size)):
        assert imp.allowed(cols)[i, j] == (a_labels[i] not in ("x", "y") or c_labels[j] == "q")
    d_labels, t_labels = cols["d"].labels(), cols["t"].labels()
    for i, j in itertools.product(range(cols["d"].size), range(cols["t"].size)):
        assert comb.allowed(cols)[i, j] == ((d_labels[i], t_labels[j]) in {("lo", "r"), ("hi", "s"), ("hi", "r")})
    # s: 10 bins of 10 (0-9, 10-19, ...), e: 4 bins of 25: a bin pair is allowed iff some s <= some e
    mask = ineq.allowed(cols)
    for i, j in itertools.product(range(10), range(4)):
        assert mask[i, j] == (10 * i <= 25 * j + 24)
    assert mask[10, :].all() and mask[:, 4].all()  # nulls break nothing
    view = s.view
    assert {c.members for c in view.compounds} == {("a", "c"), ("d", "t"), ("s", "e")}


def test_a_rule_on_a_derived_column_is_read_on_its_source():
    level = {"name": "level", "type": "categorical", "values": ["low", "high"]}
    derive = {"type": "derived_from", "column": "level", "source": "a",
              "mapping": {"x": "low", "y": "low", "z": "high"}}
    s = schema(derive, {"type": "implies", "if": {"level": "high"}, "then": {"c": "p"}}, columns=[*COLUMNS, level])
    (compound,) = s.view.compounds
    assert compound.members == ("a", "c") and "level" not in s.view.names
    a, c = s.column("a"), s.column("c")
    allowed = {(a.labels()[i], c.labels()[j]) for i, j in compound.cells}
    assert ("z", "q") not in allowed and ("z", "p") in allowed and ("x", "q") in allowed
    # the source's other/null derive a null level: the rule's `if` does not hold there
    assert (None, "q") in allowed


def test_a_group_too_large_is_refused():
    big = [{"name": f"k{i}", "type": "categorical", "values": list(range(99))} for i in range(3)]
    rules = [{"type": "forbid", "cells": {"k0": 0, "k1": 0}}, {"type": "forbid", "cells": {"k1": 0, "k2": 0}}]
    with pytest.raises(SchemaError, match="span 1,030,301 cells"):
        parse_schema({"columns": big, "rules": rules})
    with pytest.raises(SchemaError, match=r"10200 allowed combinations is more than max_column_codes \(5000\)"):
        parse_schema({"columns": big[:2], "rules": rules[:1]})
    wide = parse_schema({"columns": big[:2], "rules": rules[:1], "max_column_codes": 20000})
    assert wide.view.domain().sizes == (101 * 101 - 1,)


def test_the_cli_refuses_a_bad_rule_with_exit_2_before_spark(tmp_path, capsys):
    from privsyn_spark.cli import entry as cli

    bad = tmp_path / "bad.yaml"
    bad.write_text("columns:\n  - {name: a, type: categorical, values: [x, y]}\n"
                   "  - {name: b, type: categorical, values: [p, q]}\n"
                   "rules:\n  - {type: derived_from, column: b, source: a, mapping: {x: p}}\n")
    assert cli.main(["run", "--input", str(tmp_path / "none.csv"), "--output", str(tmp_path / "o"),
                     "--schema", str(bad), "--no-ledger", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "privsyn-spark: error: rules (b derived from a): the mapping does not cover the source's values ['y']"
    assert not (tmp_path / "o").exists()
