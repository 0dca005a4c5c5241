"""Synthetic people: fresh keys, degrees inside their bins from the noisy histogram, rows dealt by
signature with back-off; checked against hand-built persons, pools and histograms."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.schema.people import degree_bins
from privsyn_spark.synthesize import people_rows
from privsyn_spark.synthesize.people_rows import deal_rows, draw_degrees, key_persons

SIGNATURE = ["seg", "region", "_degree", "_mode_channel"]


def test_keys_are_fresh_random_hex_unique_and_never_an_input_id(spark):
    ids = [f"{i:032x}" for i in range(2_000)]  # real ids that look like keys
    persons = spark.createDataFrame(pd.DataFrame({"seg": np.arange(2_000) % 3, "real": ids})).repartition(3)
    keyed = key_persons(persons.drop("real"), "customer_id")
    assert keyed.columns == ["customer_id", "seg"]
    first = keyed.toPandas()
    assert first.customer_id.map(lambda k: re.fullmatch(r"[0-9a-f]{32}", k) is not None).all()
    assert first.customer_id.nunique() == 2_000 and not set(first.customer_id) & set(ids)
    assert sorted(first.seg) == sorted(np.arange(2_000) % 3)
    again = keyed.toPandas()  # recomputed: the same keys (one salt per call)
    assert again.sort_values("customer_id").customer_id.tolist() == sorted(first.customer_id)
    other = key_persons(persons.drop("real"), "customer_id").toPandas()  # another call: fresh keys
    assert not set(other.customer_id) & set(first.customer_id)
    with pytest.raises(ValueError, match="already have a column 'seg'"):
        key_persons(persons, "seg")


def test_degrees_fall_in_their_bin_and_follow_the_noisy_histogram(spark):
    hist = np.array([5.0, -2, 7, 1, -3, -1, 2, 6, 10, -5, 30, 0])  # M = 12; bins 1,2,3,4,5-6,7-8,9-12
    n = 6_000
    bins = np.arange(n) % 7
    persons = key_persons(spark.createDataFrame(pd.DataFrame({"_degree": bins})), "k")
    drawn = draw_degrees(persons, "_degree", hist, seed=5)
    assert drawn.columns == ["k", "_degree", "degree"]
    got = drawn.toPandas()
    lows = np.array([low for low, _ in degree_bins(12)])
    highs = np.array([high for _, high in degree_bins(12)])
    assert ((got.degree >= lows[got._degree]) & (got.degree <= highs[got._degree])).all()
    # within a bin: the clipped histogram normalised; 5-6 has no mass, so uniform
    want = {4: {5: 0.5, 6: 0.5}, 5: {7: 0.25, 8: 0.75}, 6: {9: 0.25, 10: 0.0, 11: 0.75, 12: 0.0}}
    for b, shares in want.items():
        freq = got[got._degree == b].degree.value_counts(normalize=True)
        for degree, share in shares.items():  # ~857 draws a bin: sd <= 0.017, tolerance 0.06
            assert abs(freq.get(degree, 0.0) - share) < 0.06, (b, degree)
    same = draw_degrees(persons, "_degree", hist, seed=5).toPandas()
    other = draw_degrees(persons, "_degree", hist, seed=6).toPandas()
    assert same.sort_values("k").degree.tolist() == got.sort_values("k").degree.tolist()
    assert other.sort_values("k").degree.tolist() != got.sort_values("k").degree.tolist()


def hand_built(spark):
    """Persons with a signature the pool covers (A: 40 rows), one it has with fewer rows than its degree
    (B: 1 row for 3, down to ``seg`` 1: 3 rows), one it has down to ``_degree`` (C), one down to ``seg`` (D)
    and one not at all (E); ``amount`` tells the pool rows apart."""
    persons = pd.DataFrame([
        ("a1", 0, "n", 1, 2, 2), ("a2", 0, "n", 1, 2, 3),     # A: pool of 40 rows
        ("b1", 1, "s", 0, 0, 3),                             # B: pool of 1 row
        ("c1", 0, "n", 1, 5, 4),                             # C: (0, n, 1) only
        ("d1", 1, "e", 3, 1, 2),                             # D: (1,) only
        ("e1", 7, "w", 0, 0, 1),                             # E: the whole pool
    ], columns=["key", *SIGNATURE, "degree"])
    pool = [(0, "n", 1, 2, 100 + i, 9) for i in range(40)]
    pool += [(1, "s", 0, 0, 200, 8)]
    pool += [(0, "n", 1, 3, 300 + i, 7) for i in range(3)]
    pool += [(1, "w", 2, 1, 400 + i, 6) for i in range(2)]
    frame = pd.DataFrame(pool, columns=[*SIGNATURE, "amount", "channel"])
    frame = frame[["seg", "amount", "region", "channel", "_degree", "_mode_channel"]]  # the schema's order
    return spark.createDataFrame(persons), spark.createDataFrame(frame), frame


@pytest.mark.parametrize("bucket_rows", [1 << 16, 1], ids=["one bucket", "a bucket a row"])
def test_rows_are_dealt_by_signature_with_backoff(spark, monkeypatch, bucket_rows):
    monkeypatch.setattr(people_rows, "BUCKET_ROWS", bucket_rows)  # 1: every pool signature over many buckets
    persons, pool, frame = hand_built(spark)
    out, cached = deal_rows(persons, pool, SIGNATURE, "key", seed=1)
    assert out.columns == ["key", "seg", "amount", "region", "channel"]
    rows = out.toPandas()
    people = persons.toPandas().set_index("key")
    assert set(rows.key) <= set(people.index)
    assert rows.groupby("key").size().to_dict() == people.degree.to_dict()
    for col in ("seg", "region"):  # person columns: the person's, constant per key
        assert (rows[col].to_numpy() == people.loc[rows.key, col].to_numpy()).all()
    amount = rows.groupby("key").amount.apply(sorted).to_dict()
    assert all(100 <= a < 140 for a in amount["a1"] + amount["a2"])  # its own signature
    assert len(set(amount["a1"] + amount["a2"])) == 5                # enough rows: none used twice
    assert set(amount["c1"]) <= set(range(100, 140)) | {300, 301, 302}  # backed off to (0, n, 1): 43 for 9
    assert len(set(amount["c1"])) == 4                                   # none used twice
    assert amount["b1"] == [200, 400, 401]  # 1 row for degree 3: backed off to seg 1 (3 rows), none twice
    assert set(amount["d1"]) <= {200, 400, 401} and len(set(amount["d1"])) == 2  # seg 1 too: shared, cycled
    assert amount["e1"][0] in set(frame.amount)
    channel = rows.set_index("amount").channel.to_dict()  # row columns come with their pool row
    assert all(channel[a] == frame.set_index("amount").channel[a] for a in channel)
    assert len(cached) == 2 and all(df.is_cached for df in cached)  # computed once, until their owner unpersists
    for df in cached:
        df.unpersist()
    with pytest.raises(ValueError, match=r"the pool lacks \['seg'\]"):
        deal_rows(persons, pool.drop("seg"), SIGNATURE, "key", seed=1)
    with pytest.raises(ValueError, match="the pool has a column 'key'"):
        deal_rows(persons, pool.withColumn("key", pool.seg), SIGNATURE, "key", seed=1)


def test_a_short_whole_pool_is_dealt_evenly_with_replacement(spark):
    persons = spark.createDataFrame(pd.DataFrame({"key": ["p", "q"], "seg": [0, 0], "degree": [5, 2]}))
    pool = spark.createDataFrame(pd.DataFrame({"seg": [0, 0, 1], "amount": [1, 2, 3]}))
    rows = deal_rows(persons, pool, ["seg"], "key", seed=3)[0].toPandas()  # seg 0 has 2 rows for 5: the whole pool
    assert rows.groupby("key").size().to_dict() == {"p": 5, "q": 2}
    assert sorted(rows.amount.value_counts().tolist()) == [2, 2, 3]  # each row 7 // 3 or 7 // 3 + 1 times
    assert (rows.seg == 0).all()  # the person's own, whatever the pool row's


def test_dealing_never_broadcasts_a_side_that_grows_with_the_persons(spark):
    """Spark would broadcast a small-looking side (its estimate after an aggregation can be far below the
    truth: at 10^6 persons it exhausted the driver's memory); every join of the dealing is a sort-merge join."""
    persons, pool, _ = hand_built(spark)
    plan = deal_rows(persons, pool, SIGNATURE, "key", seed=1)[0]._jdf.queryExecution().executedPlan().toString()
    assert "SortMergeJoin" in plan
    assert "Broadcast" not in plan


@pytest.mark.slow
def test_dealing_is_deterministic_for_a_seed_and_refuses_an_empty_pool(spark):
    persons, pool, _ = hand_built(spark)
    sort = ["key", "amount"]
    one = deal_rows(persons, pool, SIGNATURE, "key", seed=1)[0].toPandas().sort_values(sort).reset_index(drop=True)
    again = deal_rows(persons, pool.repartition(3), SIGNATURE, "key", seed=1)[0].toPandas()
    pd.testing.assert_frame_equal(one, again.sort_values(sort).reset_index(drop=True))
    other = deal_rows(persons, pool, SIGNATURE, "key", seed=2)[0].toPandas().sort_values(sort).reset_index(drop=True)
    assert not one.equals(other)
    with pytest.raises(ValueError, match="pool of synthetic rows is empty"):
        deal_rows(persons, pool.limit(0), SIGNATURE, "key", seed=1)
    assert deal_rows(persons.limit(0), pool, SIGNATURE, "key", seed=1)[0].count() == 0


def person_table(rows: pd.DataFrame, max_rows: int) -> pd.DataFrame:
    """One row per person: its person columns, ``_degree`` (the bin of min(rows, M)) and ``_mode_channel``
    (its most frequent channel, ties to the smallest): what the person model measures."""
    lows = np.array([low for low, _ in degree_bins(max_rows)])
    per = rows.groupby("person_id").agg(segment=("segment", "first"), region=("region", "first"),
                                        n=("channel", "size"))
    per["_degree"] = np.searchsorted(lows, np.minimum(per.n, max_rows), side="right") - 1
    per["_mode_channel"] = rows.groupby("person_id").channel.agg(lambda s: s.value_counts().sort_index().idxmax())
    return per


@pytest.mark.slow
def test_two_flat_fits_give_persons_and_a_pool_that_deal_rows_joins(spark, tmp_path):
    """The interface end to end before the people model is wired: a person model and a row model fitted
    with today's PrivSyn on a small keyed table, persons keyed and given degrees, rows dealt to them."""
    from privsyn_spark import PrivSyn, Schema, Settings, ShardingConfig
    from privsyn_spark.sample.generator import people_table

    m = 12
    real = people_table(spark, 400, mean_rows=4.0, max_rows=m, seed=2) \
        .select("person_id", "segment", "region", "channel", "amount_band").toPandas()
    per = person_table(real, m)
    derived = real.join(per[["_degree", "_mode_channel"]], on="person_id")
    hist = np.bincount(np.minimum(per.n, m), minlength=m + 1)[1:].astype(float)  # a demo's "noisy" histogram

    def column(name: str, size: int) -> dict:
        return {"name": name, "type": "categorical", "values": list(range(size)), "dtype": "int"}
    person_cols = [column("segment", 5), column("region", 10), column("_degree", len(degree_bins(m))),
                   column("_mode_channel", 6)]
    settings = Settings(sharding=ShardingConfig(shard_rows=1000, gum_rounds=2))

    def fit(frame: pd.DataFrame, columns: list[dict], run: str):
        synth = PrivSyn(Schema.from_dict({"columns": columns}), epsilon=8.0, no_ledger=True, run_id=run,
                        runs_dir=str(tmp_path / "runs"), settings=settings)
        return synth.fit(spark.createDataFrame(frame[[c["name"] for c in columns]]))

    person_model = fit(per, person_cols, "persons")
    row_model = fit(derived, [*person_cols[:2], column("channel", 6), column("amount_band", 10), *person_cols[2:]],
                    "rows")
    persons = draw_degrees(key_persons(person_model.sample(300, seed=1), "person_id"), "_degree", hist, seed=1)
    total = persons.agg({"degree": "sum"}).first()[0]
    pool = row_model.sample(int(1.2 * total), seed=1)
    rows, _ = deal_rows(persons, pool, ["segment", "region", "_degree", "_mode_channel"], "person_id", seed=1)
    assert rows.columns == ["person_id", "segment", "region", "channel", "amount_band"]
    got, people = rows.toPandas(), persons.toPandas().set_index("person_id")
    assert len(got) == total and set(got.person_id) == set(people.index)
    assert got.groupby("person_id").size().to_dict() == people.degree.to_dict()
    for col in ("segment", "region"):
        assert (got[col].to_numpy() == people.loc[got.person_id, col].to_numpy()).all()
    assert not set(got.person_id) & {str(i) for i in real.person_id}
    # alike rows stay alike: far more rows on their person's modal channel than if they were independent
    # (real: about 0.81, independent: about 0.175, synthetic: 0.27-0.32 over 14 runs, each with fresh noise)
    modes, channels = (derived[c].value_counts(normalize=True) for c in ("_mode_channel", "channel"))
    independent = sum(modes.get(c, 0.0) * channels.get(c, 0.0) for c in range(6))
    synth_share = (got.channel.to_numpy() == people.loc[got.person_id, "_mode_channel"].to_numpy()).mean()
    assert synth_share > independent + 0.05
