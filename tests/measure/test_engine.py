"""The marginal engine against pandas brute force (exact equality)."""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import (
    CellCapExceeded,
    check_domain_policies,
    count_marginals,
    one_and_two_way,
    policy_tallies,
)
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.schema.schema import load_schema, parse_schema
from tests.reference import crosstab, encode_pandas

ADULT = "privsyn_spark/sample/adult.csv.gz"


@pytest.fixture(params=["jvm", "arrow"])
def backend(request):
    """Both counting backends must give the same exact tables."""
    return request.param


def assert_all_tables_equal(counts, codes, domain):
    for attrs, table in counts.tables.items():
        np.testing.assert_array_equal(table, crosstab(codes, attrs, domain.shape(attrs)), err_msg=str(attrs))


@pytest.fixture(scope="module")
def adult(spark):
    schema = load_schema("privsyn_spark/sample/adult.schema.yaml")
    frame = pd.read_csv(ADULT, dtype=str, keep_default_na=False)
    df = spark.read.csv(ADULT, header=True, inferSchema=True)
    return schema, frame, encode(df, schema)


def test_adult_one_and_two_way_equal_pandas(adult, backend):
    schema, frame, encoded = adult
    counts = count_marginals(encoded, one_and_two_way(encoded.domain), backend=backend)
    assert counts.rows == len(frame) == 48842
    assert len(counts.tables) == 15 + 105
    assert_all_tables_equal(counts, encode_pandas(frame, schema), encoded.domain)
    # nothing outside the domain; the '?' null tokens are kept as a value and counted
    expected = {c: {"nulls": int((frame[c].str.strip() == "?").sum()), "null_handling": "value"}
                for c in schema.names if (frame[c].str.strip() == "?").any()}
    assert set(expected) == {"workclass", "occupation", "native-country"}
    assert check_domain_policies(encoded, counts) == expected


def test_adult_k_way_and_recode(adult, backend):
    schema, frame, encoded = adult
    codes = encode_pandas(frame, schema)
    marginals = [("age", "education", "income"), ("race", "gender", "relationship", "workclass")]
    counts = count_marginals(encoded, marginals, backend=backend)
    assert_all_tables_equal(counts, codes, encoded.domain)
    lut = np.arange(encoded.domain["native-country"]) .clip(max=3)  # codes >= 3 merged into 3
    identity = {a: np.arange(size) for a, size in zip(encoded.domain.attrs, encoded.domain.sizes)}
    counts = count_marginals(encoded, [("native-country", "income")], recode={**identity, "native-country": lut},
                            backend=backend)
    recoded = codes.assign(**{"native-country": lut[codes["native-country"]]})
    np.testing.assert_array_equal(counts.tables[("native-country", "income")],
                                  crosstab(recoded, ("native-country", "income"), (4, 4)))


RANDOM_SCHEMA = {
    "null_tokens": ["NA"],
    "columns": [
        {"name": "cat", "type": "categorical", "values": ["a", "b", "c", "d"]},
        {"name": "num", "type": "numerical", "dtype": "double", "min": 0, "max": 10, "bins": 5},
        {"name": "edges", "type": "numerical", "dtype": "int", "edges": [0, 3, 10, 50, 100]},
        {"name": "flag", "type": "categorical", "values": [0, 1], "dtype": "int"},
        {"name": "big", "type": "categorical", "values": [f"v{i}" for i in range(3000)]},
        {"name": "note", "type": "drop"},
    ],
}


def random_frame(rng, n):
    cats = np.array(["a", "b", "c", "d", "zz", None, "NA"], dtype=object)
    frame = pd.DataFrame({
        "cat": rng.choice(cats, n, p=[.3, .25, .2, .1, .05, .05, .05]),
        "num": np.where(rng.random(n) < .05, np.nan, rng.normal(5, 4, n)),  # out of range both sides
        "edges": rng.integers(-5, 120, n).astype(float),
        "flag": rng.integers(0, 3, n).astype(float),  # 2 is unseen
        "big": np.array([f"v{i}" for i in rng.integers(0, 3100, n)], dtype=object),  # some unseen
        "note": ["free text"] * n,
    })
    frame.loc[rng.random(n) < .03, "edges"] = np.nan
    return frame


@pytest.mark.parametrize("partitions", [1, 13])
def test_random_table_with_nulls_and_out_of_domain_values(spark, partitions, backend):
    rng = np.random.default_rng(partitions)
    frame = random_frame(rng, 20_000)
    schema = parse_schema(RANDOM_SCHEMA)
    df = spark.createDataFrame(frame.astype(object).where(frame.notna(), None)).repartition(partitions)
    encoded = encode(df, schema)
    wanted = one_and_two_way(encoded.domain) + [("cat", "num", "edges")]
    counts = count_marginals(encoded, wanted, backend=backend)
    codes = encode_pandas(frame.astype(object).where(frame.notna(), None), schema)
    assert_all_tables_equal(counts, codes, encoded.domain)
    # every value outside the domain is counted, none dropped
    x = frame["num"].to_numpy()
    e = frame["edges"].to_numpy()
    expected = {
        "cat": int(np.sum(frame["cat"] == "zz")),
        "num": int(np.sum((x < 0) | (x > 10))),
        "edges": int(np.sum((e < 0) | (e > 100))),
        "flag": int(np.sum(frame["flag"] == 2)),
        "big": int(np.sum(frame["big"].str[1:].astype(int) >= 3000)),
    }
    assert counts.out_of_domain == expected
    report = check_domain_policies(encoded, counts)
    nulls = int(frame["num"].isna().sum())  # nulls: value -> counted like every other handled value
    assert nulls > 0
    assert report["num"] == {"out_of_domain": expected["num"], "handling": "clip", "nulls": nulls,
                             "null_handling": "value", "clipped_share": pytest.approx(expected["num"] / len(frame))}
    assert sum(t.sum() for t in (counts.tables[("cat",)],)) == len(frame)


def test_nan_and_unparseable_numbers_are_counted_as_such_not_as_clipped_nor_null(spark, backend):
    """NaN and text that is no number used to be tallied (and reported) as clipped."""
    schema = parse_schema({"columns": [{"name": "x", "type": "numerical", "min": 0, "max": 1, "bins": 2},
                                       {"name": "t", "type": "numerical", "min": 0, "max": 1, "bins": 2}]})
    df = spark.createDataFrame([(0.2, "0.7"), (float("nan"), "n/a"), (None, "5"), (7.0, None)], "x double, t string")
    encoded = encode(df, schema)
    counts = count_marginals(encoded, [("x",), ("t",)], backend=backend)
    assert counts.tables[("x",)].tolist() == [2, 1, 1] and counts.out_of_domain == {"x": 1, "t": 1}
    assert counts.not_a_number == {"x": 1, "t": 1} and counts.null_failures == {"x": 0, "t": 0}
    assert check_domain_policies(encoded, counts)["t"] == {"out_of_domain": 1, "handling": "clip", "nulls": 1,
                                                           "null_handling": "value", "not_a_number": 1,
                                                           "not_a_number_handling": "first bin", "clipped_share": 0.25}


def test_fail_policies_are_tallied_for_their_noisy_checks_and_never_refuse(spark, backend, caplog):
    """A ``fail`` policy is a noisy check now (privacy/policy_checks.py): the engine tallies every declared
    check (zeros too) and neither raises nor logs a line whose existence depends on a tally."""
    import logging

    schema = parse_schema({"columns": [
        {"name": "c", "type": "categorical", "values": ["a"], "unseen": "fail"},
        {"name": "n", "type": "numerical", "min": 0, "max": 1, "out_of_range": "fail", "nulls": "fail"},
        {"name": "m", "type": "categorical", "values": ["x"], "nulls": "fail"}]})
    df = spark.createDataFrame([("a", 0.5, "x"), ("b", 2.0, "x"), ("b", None, "x")], "c string, n double, m string")
    encoded = encode(df, schema)
    counts = count_marginals(encoded, [("c", "n", "m")], backend=backend)
    assert policy_tallies(encoded, counts) == {"column 'c': values outside the declared domain": 2,
                                               "column 'n': values outside the declared domain": 1,
                                               "column 'n': nulls": 1, "column 'm': nulls": 0}
    clean = spark.createDataFrame([("a", 0.5, "x")] * 3, "c string, n double, m string")
    logs = []
    for frame in (df, clean):
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="privsyn_spark"):
            enc = encode(frame, schema)
            check_domain_policies(enc, count_marginals(enc, [("c", "n", "m")], backend=backend))
        logs.append(sorted(r.getMessage() for r in caplog.records if r.name == "privsyn_spark.measure.engine"
                           and "counted" not in r.getMessage()))
    assert logs[0] == logs[1]  # the same lines whether or not a tally is > 0 (R1)


def test_empty_table(spark, backend):
    schema = parse_schema(RANDOM_SCHEMA)
    df = spark.createDataFrame(random_frame(np.random.default_rng(0), 10)).limit(0)
    counts = count_marginals(encode(df, schema), one_and_two_way(schema.domain()), backend=backend)
    assert counts.rows == 0 and all(t.sum() == 0 for t in counts.tables.values())
    assert all(v == 0.0 for v in indif_scores({k: v for k, v in counts.tables.items() if len(k) == 2}).values())


def test_one_column(spark, backend):
    schema = parse_schema({"columns": [{"name": "c", "type": "categorical", "values": ["a", "b"]}]})
    df = spark.createDataFrame([("a",), ("b",), ("b",), (None,)], "c string")
    counts = count_marginals(encode(df, schema), one_and_two_way(schema.domain()), backend=backend)
    assert list(counts.tables) == [("c",)] and counts.tables[("c",)].tolist() == [1, 2, 0, 1]


def test_cell_cap_is_refused_before_any_work(spark):
    schema = parse_schema(RANDOM_SCHEMA)
    df = spark.createDataFrame(random_frame(np.random.default_rng(0), 10))
    with pytest.raises(CellCapExceeded, match="108,072 cells, above the cap of 100,000"):
        count_marginals(encode(df, schema), [("big", "cat", "num")], max_cells=100_000)


def test_indif_matches_definition(adult):
    schema, frame, encoded = adult
    codes = encode_pandas(frame, schema)
    pairs = list(combinations(["age", "education", "race", "income"], 2))  # domain order
    counts = count_marginals(encoded, pairs)
    scores = indif_scores(counts.tables)
    for a, b in pairs:
        joint = pd.crosstab(codes[a], codes[b]).to_numpy().astype(float)
        expected = np.abs(joint - np.outer(joint.sum(1), joint.sum(0)) / len(codes)).sum()
        assert scores[(a, b)] == pytest.approx(expected, rel=1e-12)


def test_auto_backend_counts_in_the_jvm(adult):
    """The test session is built like every session: with the counter jar, so ``auto`` takes the JVM."""
    _, _, encoded = adult
    assert count_marginals(encoded, [("age",)]).backend == "jvm"


def test_unknown_backend_is_refused(adult):
    with pytest.raises(ValueError, match="backend must be one of"):
        count_marginals(adult[2], [("age",)], backend="gpu")


def test_nulls_none_has_no_null_code_and_counts_a_null_as_out_of_domain(spark, backend):
    schema = parse_schema({"columns": [
        {"name": "c", "type": "categorical", "values": ["a", "b"], "nulls": "none"},
        {"name": "n", "type": "numerical", "min": 0, "max": 1, "bins": 2, "nulls": "none"}]})
    assert [c.size for c in schema.columns] == [3, 2] and schema.column("n").null_code is None
    df = spark.createDataFrame([("a", 0.2), ("b", 0.7), (None, None)], "c string, n double")
    encoded = encode(df, schema)
    counts = count_marginals(encoded, [("c",), ("n",)], backend=backend)
    assert counts.tables[("c",)].tolist() == [1, 1, 1]  # the null goes to the other code
    assert counts.tables[("n",)].tolist() == [2, 1]     # ... and to the first bin
    assert counts.out_of_domain == {"c": 1, "n": 1}
    assert check_domain_policies(encoded, counts) == {"c": {"out_of_domain": 1, "handling": "other"},
                                                      "n": {"out_of_domain": 1, "handling": "clip",
                                                            "clipped_share": pytest.approx(1 / 3)}}
    strict = parse_schema({"columns": [{"name": "n", "type": "numerical", "min": 0, "max": 1, "nulls": "none",
                                        "out_of_range": "fail"}]})
    encoded = encode(df.select("n"), strict)
    assert policy_tallies(encoded, count_marginals(encoded, [("n",)], backend=backend)) == {
        "column 'n': values outside the declared domain": 1}
