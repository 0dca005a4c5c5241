"""Decoding under declared rules: compounds split into their members, derived columns generated from
their source, an inequality kept inside its bin pair; every decoded row keeps every rule."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.schema.rules import bin_value_bounds
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.write.decode import Decoder, RowUniforms

SCHEMA = parse_schema({"columns": [
    {"name": "start", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 4},
    {"name": "rel", "type": "categorical", "values": ["husband", "wife", "child"]},
    {"name": "level", "type": "numerical", "dtype": "int", "min": 0, "max": 3, "bins": 4},
    {"name": "sex", "type": "categorical", "values": ["f", "m"]},
    {"name": "end", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 3, "spikes": [50]},
    {"name": "x", "type": "numerical", "dtype": "double", "min": 0, "max": 1, "bins": 3},
    {"name": "y", "type": "numerical", "dtype": "double", "min": 0, "max": 1, "bins": 2},
], "rules": [
    {"type": "inequality", "low": "start", "high": "end"},
    {"type": "implies", "if": {"rel": "husband"}, "then": {"sex": "m"}},
    {"type": "derived_from", "column": "level", "source": "rel", "mapping": {"husband": 3, "wife": 2, "child": 0}},
    {"type": "inequality", "low": "x", "high": "y"},
]})


def test_every_code_of_the_synthesis_domain_decodes_to_rows_keeping_every_rule():
    view = SCHEMA.view
    assert view.names == ("__rule_start__end", "__rule_rel__sex", "__rule_x__y")
    domain = view.domain()
    rng = np.random.default_rng(0)
    n = 20_000
    codes = np.column_stack([rng.integers(0, size, n) for size in domain.sizes])  # any code of the domain
    batch = Decoder(SCHEMA, {}, {}).decode(codes, RowUniforms(3, 0, 0, n))
    assert batch.schema.names == list(SCHEMA.names)
    rows = batch.to_pandas()
    both = rows["start"].notna() & rows["end"].notna()
    assert both.sum() > n / 4 and (rows["start"][both] <= rows["end"][both]).all()
    xy = rows["x"].notna() & rows["y"].notna()
    assert xy.sum() > n / 4 and (rows["x"][xy] <= rows["y"][xy]).all()
    assert not ((rows["rel"] == "husband") & (rows["sex"] != "m")).any()
    assert ((rows["rel"] == "husband") & (rows["sex"] == "m")).any() and (rows["sex"] == "f").any()
    expected = rows["rel"].map({"husband": 3, "wife": 2, "child": 0})
    assert (rows["level"].isna() == expected.isna()).all()
    assert (rows["level"][expected.notna()] == expected[expected.notna()]).all()
    assert rows["end"].eq(50).any()  # the spike bin decodes to its value


@pytest.mark.parametrize("column", ["start", "end", "x", "y"])
def test_values_stay_in_the_bin_of_their_code(column):
    """The joint redraw moves values inside their bins only: each value re-encodes to its code."""
    view = SCHEMA.view
    compound = next(c for c in view.compounds if column in c.members)
    n = 5000
    rng = np.random.default_rng(1)
    codes = np.column_stack([rng.integers(0, size, n) for size in view.domain().sizes])
    decoder = Decoder(SCHEMA, {}, {})
    uniforms = RowUniforms(7, 0, 0, n)
    member_codes = decoder.column_codes(codes, uniforms)[column]
    values = decoder.decode(codes, uniforms).column(SCHEMA.names.index(column)).to_numpy(zero_copy_only=False)
    col = SCHEMA.column(column)
    lo, hi = bin_value_bounds(col)
    inside = member_codes < col.base_size
    assert compound.members.index(column) in (0, 1)
    b = member_codes[inside]
    assert np.all(values[inside] >= lo[b]) and np.all(values[inside] <= hi[b])
    assert np.isnan(values[~inside].astype(float)).all()


def test_decoding_without_rules_is_unchanged():
    """The schema without rules: the view is the columns, the codes are the columns' (the default path)."""
    plain = parse_schema({"columns": [c.to_dict() for c in SCHEMA.columns]})
    assert plain.view.columns == plain.columns and not plain.view.inequalities
    codes = np.column_stack([np.arange(100) % c.size for c in plain.columns])
    batch = Decoder(plain, {}, {}).decode(codes, RowUniforms(0, 0, 0, 100))
    assert batch.schema.names == list(plain.names) and batch.num_rows == 100
