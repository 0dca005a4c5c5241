"""Rare values merged to their parent prefix (a declared hierarchy), not to one global code."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.privacy.rare_values import merge_attribute
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import parse_schema

COLUMN = parse_schema({"columns": [{"name": "icd", "type": "categorical", "hierarchy": {"prefix": [2, 1]},
                                    "values": ["A01", "A02", "A11", "A12", "B01", "B02", "C01", "D01"]}]}
                      ).column("icd")


def test_prefix_levels_group_the_declared_values_and_round_trip():
    assert [level.tolist() for level in COLUMN.prefix_levels()] == [
        [0, 0, 1, 1, 2, 2, 3, 4, -1, -1], [0, 0, 0, 0, 1, 1, 2, 3, -1, -1]]  # other and null: no parent
    assert parse_schema({"columns": [COLUMN.to_dict()]}).column("icd") == COLUMN


def test_rare_leaves_go_to_the_finest_parent_holding_enough_then_to_the_last_code():
    theta = 10.0
    #                 A01 A02 A11 A12 B01 B02 C01 D01 other null
    noisy = np.array([50, 6., 5., 6., 4., 3., 2., 1., 0., 40.])
    value_map, collapsed, zeroed = merge_attribute(noisy, theta, COLUMN.prefix_levels())
    # kept: A01, null; A1x together (11 >= theta) at level 2; A02 alone is not enough at level 2, nor B0x (7):
    # at level 1 A02 stays alone (6 < theta), B01 + B02 = 7 < theta; the rest: the last code
    assert value_map.tolist() == [0, 3, 2, 2, 3, 3, 3, 3, 3, 1]
    assert collapsed.tolist() == [50, 40, 11, 6 + 4 + 3 + 2 + 1 + 0] and not zeroed
    flat_map, flat, _ = merge_attribute(noisy, theta)  # without the hierarchy: one global code
    assert flat_map.tolist() == [0, 2, 2, 2, 2, 2, 2, 2, 2, 1] and flat.tolist() == [50, 40, 27]
    big_b = noisy.copy()
    big_b[[4, 5]] = [6, 5]  # B01 + B02 = 11: B's own merged code at level 1
    value_map, collapsed, zeroed = merge_attribute(big_b, theta, COLUMN.prefix_levels())
    assert value_map.tolist() == [0, 4, 2, 2, 3, 3, 4, 4, 4, 1]
    assert collapsed.tolist() == [50, 40, 11, 11, 0] and zeroed  # the values left: 9 < theta, zeroed


@pytest.mark.parametrize("hierarchy, message", [
    ({"prefix": [1, 3]}, "longest first"), ({"prefix": []}, "hierarchy must be"),
    ({"levels": [1]}, "hierarchy must be"), ({"prefix": [0]}, "must be >= 1"), ({"prefix": [1.5]}, "whole number"),
])
def test_bad_hierarchies_are_refused_with_the_column_named(hierarchy, message):
    with pytest.raises(SchemaError, match=message) as err:
        parse_schema({"columns": [{"name": "icd", "type": "categorical", "values": ["A1"], "hierarchy": hierarchy}]})
    assert "icd" in str(err.value)
    with pytest.raises(SchemaError, match="need string values"):
        parse_schema({"columns": [{"name": "n", "type": "categorical", "values": [10, 11],
                                   "hierarchy": {"prefix": [1]}}]})
