"""Numbers at the edges (+-inf, NaN, 1e30, unparseable text) are clipped and counted, never crash a cast."""

import math

import pytest

from privsyn_spark.errors import BadInputData
from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import check_domain_policies, count_marginals
from privsyn_spark.schema.schema import parse_schema

VALUES = [0.5, 4.0, math.inf, -math.inf, 1e30, -1e30, math.nan, None, 9.5, 2 ** 62 * 8.0]


def _frame(spark):
    rows = [(v, v, None if v is None else str(v), v) for v in VALUES] + [(1.0, 1.0, "twelve", 1.0)]
    return spark.createDataFrame(rows, "uniform double, edges double, text string, category double")


def _schema(policy):
    return parse_schema({"columns": [
        {"name": "uniform", "type": "numerical", "dtype": "int", "min": 0, "max": 9, "bins": 5, "out_of_range": policy},
        {"name": "edges", "type": "numerical", "edges": [0, 1, 5, 10], "out_of_range": policy},
        {"name": "text", "type": "numerical", "dtype": "long", "min": 0, "max": 9, "bins": 3, "out_of_range": policy},
        {"name": "category", "type": "categorical", "dtype": "int", "values": [1, 4, 9],
         "unseen": "other" if policy == "clip" else "fail"},
    ]})


def test_huge_infinite_and_unparseable_numbers_are_clipped_and_counted(spark):
    schema = _schema("clip")
    counts = count_marginals(encode(_frame(spark), schema), [(c,) for c in schema.names])
    # rows: 0.5 4 inf -inf 1e30 -1e30 nan null 9.5 2^65, then 1.0 ("twelve" in text)
    # bins of width 2 on -0.5..9.5: low values and NaN in the first, high ones in the last, null last
    assert counts.tables[("uniform",)].tolist() == [5, 0, 1, 0, 4, 1]
    assert counts.tables[("edges",)].tolist() == [4, 2, 4, 1]  # [0,1) [1,5) [5,10] null
    assert counts.tables[("text",)].tolist() == [5, 1, 4, 1]  # unparseable text in the first bin
    assert counts.out_of_domain == {"uniform": 6, "edges": 6, "text": 7, "category": 8}
    assert counts.tables[("category",)].tolist() == [1, 1, 0, 8, 1]  # 1, 4, 9, other, null
    report = check_domain_policies(encode(_frame(spark), schema), counts)
    assert report["uniform"] == {"out_of_domain": 6, "handling": "clip", "nulls": 1, "null_handling": "value"}


def test_fail_policies_count_edge_numbers_instead_of_crashing(spark):
    schema = _schema("fail")
    encoded = encode(_frame(spark), schema)
    counts = count_marginals(encoded, [(c,) for c in schema.names])
    with pytest.raises(BadInputData, match="column 'uniform': 6 values outside the declared domain"):
        check_domain_policies(encoded, counts)
