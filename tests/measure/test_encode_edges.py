"""Numbers at the edges (+-inf, 1e30) are clipped and counted; NaN and unparseable text are counted as what they
are; none crashes a cast."""

import math

import pytest

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import check_domain_policies, count_marginals, policy_tallies
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
    assert counts.out_of_domain == {"uniform": 5, "edges": 5, "text": 5, "category": 8}
    assert counts.not_a_number == {"uniform": 1, "edges": 1, "text": 2, "category": 0}  # NaN; NaN and "twelve"
    assert counts.tables[("category",)].tolist() == [1, 1, 0, 8, 1]  # 1, 4, 9, other, null
    report = check_domain_policies(encode(_frame(spark), schema), counts)
    assert report["uniform"] == {"out_of_domain": 5, "handling": "clip", "clipped_share": 5 / 11, "nulls": 1,
                                 "null_handling": "value", "not_a_number": 1, "not_a_number_handling": "first bin"}
    assert report["text"]["not_a_number"] == 2 and "not_a_number" not in report["category"]
    # the exact share of the rows each numerical column clips, for the operator report (11 rows)
    assert {c: report[c].get("clipped_share") for c in schema.names} == {
        "uniform": 5 / 11, "edges": 5 / 11, "text": 5 / 11, "category": None}


def test_fail_policies_count_edge_numbers_instead_of_crashing(spark):
    """``fail`` no longer stops on the exact tally (a free oracle): it is tallied for a noisy check."""
    schema = _schema("fail")
    encoded = encode(_frame(spark), schema)
    counts = count_marginals(encoded, [(c,) for c in schema.names])
    assert check_domain_policies(encoded, counts)["uniform"]["not_a_number_handling"] == "fail"  # no exact refusal
    assert policy_tallies(encoded, counts)["column 'uniform': values outside the declared domain"] == 6  # NaN too


@pytest.mark.parametrize("size", [20, 1500])  # array literal, broadcast-join lookup (LOOKUP_JOIN_ABOVE = 1000)
def test_category_lookups_match_a_python_mapping(spark, size):
    import numpy as np

    rng = np.random.default_rng(size)
    words = [f"w{i}" for i in range(size)]
    evens = list(range(0, 2 * size, 2))  # not contiguous: looked up, not computed
    halves = [i / 2 for i in range(size)]
    n = 3000
    picks = rng.integers(0, size + 5, n)  # a few indices past the declared values: unseen
    rows = [(f" w{p} " if p % 7 == 0 else f"w{p}", str(2 * p) if p % 3 else 2 * p + 0.5, p / 2)
            for p in picks.tolist()] + [(None, None, None)]
    df = spark.createDataFrame(rows, "word string, even string, half double").repartition(3)
    schema = parse_schema({"max_column_codes": 10_000, "columns": [
        {"name": "word", "type": "categorical", "values": words},
        {"name": "even", "type": "categorical", "dtype": "long", "values": evens},
        {"name": "half", "type": "categorical", "values": halves}]})
    counts = count_marginals(encode(df, schema), [("word",), ("even",), ("half",)])
    inside = picks < size
    expected_word = np.bincount(np.where(inside, picks, size), minlength=size + 2)
    expected_word[size + 1] = 1  # the null row
    np.testing.assert_array_equal(counts.tables[("word",)], expected_word)
    exact_even = inside & (picks % 3 != 0)  # 2p + 0.5 is no long category
    np.testing.assert_array_equal(counts.tables[("even",)][:size], np.bincount(picks[exact_even], minlength=size))
    np.testing.assert_array_equal(counts.tables[("half",)][:size], np.bincount(picks[inside], minlength=size))
    assert counts.out_of_domain == {"word": int((~inside).sum()), "even": int((~exact_even).sum()),
                                    "half": int((~inside).sum())}
