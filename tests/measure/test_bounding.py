"""Contribution bounding in Spark (measure/bounding.py): removing a person with 10,000 rows moves every
bounded exact count vector the engine computes (both counter backends) by at most the stated L2
sensitivity; the rows kept within an id are a uniform sample (chi-square with power); null ids are units
of their own; one shuffle and no partial group limit; the tallies the operator report shows are exact."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.bounding import bound_contributions, row_keys
from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.measure.input_codes import bounded_codes
from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity
from privsyn_spark.schema.schema import parse_schema

SCHEMA = {"columns": [{"name": "pid", "type": "drop"},
                      {"name": "a", "type": "categorical", "values": [0, 1, 2], "dtype": "int"},
                      {"name": "b", "type": "categorical", "values": [0, 1, 2, 3], "dtype": "int"},
                      {"name": "c", "type": "categorical", "values": [0, 1], "dtype": "int"}]}


def _others(rng: np.random.Generator) -> pd.DataFrame:
    sizes = rng.integers(1, 30, size=300)
    pid = np.repeat(np.arange(300), sizes)
    n = pid.size
    return pd.DataFrame({"pid": pid, "a": rng.integers(0, 3, n), "b": rng.integers(0, 4, n),
                         "c": rng.integers(0, 2, n)})


def _counts(spark, frame, unit, seed, backend):
    """The engine's exact counts on the run's path: encoded and packed with the id, bounded, id dropped."""
    schema = parse_schema({**SCHEMA, "privacy_unit": {"id": "pid", "max_rows_per_id": unit.bound}})
    packed, bounded = bounded_codes(frame, schema, seed=seed)
    wanted = [*one_and_two_way(schema.domain()), ("a", "b", "c")]
    return count_marginals(packed, wanted, backend=backend).tables, bounded


@pytest.mark.parametrize("backend", ["jvm", "arrow"])
@pytest.mark.parametrize("spread", ["one cell", "many cells"])
def test_removing_a_person_of_10000_rows_moves_each_count_vector_by_at_most_the_sensitivity(spark, backend, spread):
    rng = np.random.default_rng(3)
    others = _others(rng)
    m = 10_000
    one = spread == "one cell"
    heavy = pd.DataFrame({"pid": np.full(m, 10_000), "a": np.full(m, 2) if one else rng.integers(0, 3, m),
                          "b": np.full(m, 1) if one else rng.integers(0, 4, m),
                          "c": np.full(m, 0) if one else rng.integers(0, 2, m)})
    base = spark.createDataFrame(others).repartition(3).cache()  # a fixed layout: the others' rows keep their keys
    with_heavy = base.union(spark.createDataFrame(heavy))
    for k in (1, 5, 20):
        unit = PrivacyUnit(("pid",), k)
        full, bounded = _counts(spark, with_heavy, unit, 11, backend)
        without, _ = _counts(spark, base, unit, 11, backend)
        bound = count_sensitivity(unit)
        assert bound == k
        for marginal, table in full.items():
            change = float(np.sqrt(np.sum((table.astype(np.int64) - without[marginal].astype(np.int64)) ** 2)))
            assert change <= bound + 1e-9, (marginal, k, change)
            if spread == "one cell":  # all K kept rows in one cell: the bound is attained
                assert change == pytest.approx(k)
            assert int(table.sum()) == int(without[marginal].sum()) + k  # the person keeps exactly K rows
        # every id keeps min(rows, K) of its rows (brute force against pandas)
        kept = bound_contributions(with_heavy, unit, seed=11).df.groupBy("pid").count().toPandas()
        kept = kept.set_index("pid")["count"]
        expected = pd.concat([others, heavy]).groupby("pid").size().clip(upper=k)
        assert kept.sort_index().to_dict() == expected.sort_index().to_dict()
    base.unpersist()


@pytest.mark.parametrize("k", [1, 2])
def test_rows_kept_within_an_id_are_uniform_chi_square(spark, k):
    """4,000 ids of 6 rows each (positions 0..5 in input order), K = 1 (the aggregate) and K = 2 (the
    window): each position is kept 4000 * K/6 times in expectation. A selection by input order (the first
    K) gives a statistic of 20,000 (K = 1) or ~16,000 (K = 2); the threshold 30 (5 degrees of freedom) is
    passed by a uniform selection with probability > 0.9999."""
    ids, per = 4000, 6
    frame = pd.DataFrame({"pid": np.repeat(np.arange(ids), per), "pos": np.tile(np.arange(per), ids)})
    df = spark.createDataFrame(frame).repartition(2)
    for seed in (1, 2):
        kept = bound_contributions(df, PrivacyUnit(("pid",), k), seed=seed).df
        counts = kept.groupBy("pos").count().toPandas().set_index("pos")["count"].reindex(range(per), fill_value=0)
        expected = ids * k / per
        statistic = float((((counts - expected) ** 2) / expected).sum())
        assert statistic < 30.0, (seed, counts.to_dict())
        pairs = kept.groupBy("pid").count().toPandas()["count"]
        assert len(pairs) == ids and (pairs == k).all()
    # unseeded (the production path: a secret from os.urandom): two boundings keep different rows
    a = bound_contributions(df, PrivacyUnit(("pid",), k)).df.groupBy("pos").count().toPandas()
    b = bound_contributions(df, PrivacyUnit(("pid",), k)).df.groupBy("pos").count().toPandas()
    assert not a.sort_values("pos").reset_index(drop=True).equals(b.sort_values("pos").reset_index(drop=True))


def test_row_keys_never_tie(spark):
    """Seeded (the tests' keys), the key is a bijection of the row index (splitmix64's finaliser): distinct
    indices, distinct keys, checked around the 32-bit halves and Spark's partition offsets (partition << 33).
    Unseeded (the run's keys), each row draws 64 random bits: no tie among 10^5 rows, and two draws differ."""
    edges = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**33 - 1, 2**33, 2**63 - 1, -(2**63), -1]
    base = [p << 33 for p in range(0, 2000, 7)]
    values = sorted({*edges, *(b + d for b in base for d in range(0, 300, 3))})
    df = spark.createDataFrame(pd.DataFrame({"i": np.asarray(values, dtype=np.int64)}))
    for seed in (3, 4):
        keys = df.select(row_keys(df["i"], seed).alias("k")).toPandas()["k"]
        assert keys.nunique() == len(values)
    one = df.select(row_keys(df["i"], 3).alias("k")).toPandas()["k"]
    other = df.select(row_keys(df["i"], 4).alias("k")).toPandas()["k"]
    assert (one != other).mean() > 0.99  # the seed picks the keys
    rows = spark.range(100_000, numPartitions=3)
    drawn = rows.select(row_keys(rows["id"]).alias("k")).toPandas()["k"]
    again = rows.select(row_keys(rows["id"]).alias("k")).toPandas()["k"]
    assert drawn.nunique() == len(drawn) and (drawn != again).mean() > 0.99
    assert abs(float((drawn < 0).mean()) - 0.5) < 0.01  # the sign bit too is random


@pytest.mark.parametrize("k", [1, 2])
def test_null_ids_are_units_of_their_own_and_the_tallies_are_exact(spark, k):
    frame = pd.DataFrame({"pid": [1, 1, 1, 1, 2, 2, 3, None, None, None],
                          "a": [0, 1, 2, 0, 1, 1, 2, 0, 0, 0], "b": [0] * 10, "c": [1] * 10})
    df = spark.createDataFrame(frame.astype({"pid": "Int64"}))
    bounded = bound_contributions(df, PrivacyUnit(("pid",), k), seed=5)
    out = bounded.df.toPandas()
    kept = min(4, k) + min(2, k) + 1 + 3  # the 3 null-id rows are all kept
    assert len(out) == kept and list(out.columns) == ["pid", "a", "b", "c"]
    assert int(out["pid"].isna().sum()) == 3
    assert out.dropna().groupby("pid").size().to_dict() == {1: k, 2: k, 3: 1}
    stats = bounded.stats()
    dropped = 10 - kept
    assert stats == {"private": False, "max_rows_per_id": k, "rows": 10, "rows_kept": kept, "rows_dropped": dropped,
                     "rows_dropped_share": dropped / 10, "ids": 6, "ids_truncated": 2 if k == 1 else 1,
                     "ids_truncated_share": (2 if k == 1 else 1) / 6, "null_id_rows": 3, "null_id_rows_share": 0.3,
                     "null_ids": "keep", "warning": stats["warning"]}
    assert f"dropped {dropped / 10:.1%} of the rows" in stats["warning"]
    assert "30.0% of the rows have a null privacy id" in stats["warning"] and "null_ids: drop" in stats["warning"]
    # null_ids: drop removes them, counted: the rows dropped include them, no null id is left
    bounded = bound_contributions(df, PrivacyUnit(("pid",), k, "drop"), seed=5)
    out = bounded.df.toPandas()
    assert len(out) == kept - 3 and not out["pid"].isna().any()
    stats = bounded.stats()
    assert (stats["rows"], stats["rows_kept"], stats["rows_dropped"], stats["ids"]) == (10, kept - 3, dropped + 3, 3)
    assert (stats["null_id_rows"], stats["null_ids"]) == (3, "drop")
    assert "they were dropped (privacy_unit null_ids: drop)" in stats["warning"]


def test_few_null_ids_raise_no_warning(spark):
    """One null-id row in 200 (0.5 %, below 1 %) and nothing dropped: no warning."""
    frame = pd.DataFrame({"pid": [*range(199), None], "a": [0] * 200})
    bounded = bound_contributions(spark.createDataFrame(frame.astype({"pid": "Int64"})), PrivacyUnit(("pid",), 1))
    assert len(bounded.df.toPandas()) == 200
    stats = bounded.stats()
    assert stats["null_id_rows"] == 1 and "warning" not in stats


@pytest.mark.parametrize("k", [1, 3])
def test_bounding_is_one_shuffle_of_the_id_and_the_packed_words(spark, k):
    """One Exchange, on the id. K = 1: a partial hash aggregate (min_by of the packed word) before it.
    K > 1: the rows shuffled as they are, then a sort and one window, and no ``WindowGroupLimit``: the
    partial one Spark adds for a filter on ``row_number`` alone sorts every input partition before the
    shuffle, which cost more than it saved (measure/bounding.py)."""
    df = spark.range(1000).selectExpr("id % 37 as pid", "id % 3 as a", "id % 4 as b", "id % 2 as c")
    unit = PrivacyUnit(("pid",), k)
    plan = bound_contributions(df, unit, seed=1).df._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1 and "WindowGroupLimit" not in plan, plan
    schema = parse_schema({**SCHEMA, "privacy_unit": {"id": "pid", "max_rows_per_id": k}})
    packed, _ = bounded_codes(df, schema, seed=1)
    packed.df.write.format("noop").mode("overwrite").save()  # the final (adaptive) plan
    plan = packed.df._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1 and "WindowGroupLimit" not in plan, plan
    exchange = plan[plan.index("Exchange"):].splitlines()[0]
    assert "hashpartitioning(pid" in exchange, exchange
    below, above = plan[plan.index("Exchange"):], plan[:plan.index("Exchange")]
    if k == 1:
        assert "HashAggregate" in below and "partial_min_by(w0" in below, plan
    else:
        assert "Window [row_number()" in above and "Sort [" in above and "Sort" not in below, plan
    assert packed.df.columns == ["w0"]  # the id does not go further


@pytest.mark.parametrize("k", [2, 50])
def test_two_id_columns_keep_k_rows_per_id_and_exact_tallies(spark, k):
    """Two id columns (a string and an int), null ids in either, ids of 1 to 200 rows over several input
    partitions: every id keeps min(rows, K) of its rows, each null-id row is kept, the tallies match a
    count in pandas, and the seed picks the rows."""
    rng = np.random.default_rng(9)
    sizes = rng.integers(1, 200, size=400)
    n = int(sizes.sum())
    frame = pd.DataFrame({"region": np.repeat(rng.choice(["n", "s", "é"], 400), sizes),
                          "pid": np.repeat(np.arange(400) % 150, sizes), "row": np.arange(n)})
    frame["region"] = frame["region"].where(rng.random(n) > 0.01, None)
    frame["pid"] = frame["pid"].astype("Int64").where(rng.random(n) > 0.01, None)
    df = spark.createDataFrame(frame).repartition(5).cache()
    unit = PrivacyUnit(("region", "pid"), k)
    bounded = bound_contributions(df, unit, seed=21)
    out = bounded.df.toPandas()
    null = frame["region"].isna() | frame["pid"].isna()
    sizes_by_id = frame[~null].groupby(["region", "pid"]).size()
    kept_by_id = out.dropna(subset=["region", "pid"]).groupby(["region", "pid"]).size()
    assert kept_by_id.sort_index().to_dict() == sizes_by_id.clip(upper=k).sort_index().to_dict()
    assert set(frame.loc[null, "row"]) <= set(out["row"])
    stats = bounded.stats()
    assert (stats["rows"], stats["rows_kept"], stats["null_id_rows"]) == (n, len(out), int(null.sum()))
    assert (stats["ids"], stats["ids_truncated"]) == (len(sizes_by_id) + int(null.sum()), int((sizes_by_id > k).sum()))
    other = bound_contributions(df, unit, seed=22).df.toPandas()
    assert set(other["row"]) != set(out["row"])  # the seed picks the rows
    df.unpersist()


def test_a_row_unit_leaves_the_table_as_it_is(spark):
    df = spark.range(10).selectExpr("id as a")
    assert bound_contributions(df, PrivacyUnit()).df is df
