"""The keyed people generator: its degree distribution, within-person preference and constant person
columns, checked on small draws against the formulas of its docstring; its flat and parent-child forms
hold the same rows, whatever the partitioning."""

from __future__ import annotations

import math

import pytest
import yaml
from pyspark.sql import functions as F

from privsyn_spark.sample.keyed_people import (
    AMOUNT_EDGES,
    CATEGORIES,
    CHANNELS,
    DEGREE_SHIFT,
    KEY,
    MAX_ROWS_PER_PERSON,
    PERSON_COLUMNS,
    ROW_COLUMNS,
    SCHEMA_PATH,
    keyed_people,
    keyed_people_tables,
)
from privsyn_spark.schema.columns import CategoricalColumn
from privsyn_spark.schema.schema import parse_schema


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@pytest.mark.slow
def test_degrees_are_capped_lognormal_by_segment(spark):
    mean_rows, sigma, cap = 12.0, 1.0, 60
    df = keyed_people(spark, 12_000, mean_rows=mean_rows, sigma=sigma, max_rows=cap, seed=5)
    per_person = df.groupBy(KEY, "segment").count().toPandas()  # generated public data, for the reference
    assert per_person["count"].min() == 1 and per_person["count"].max() == cap
    shares = per_person["segment"].value_counts(normalize=True)
    for index, (segment, p) in enumerate(PERSON_COLUMNS["segment"].items()):
        assert shares[segment] == pytest.approx(p, abs=0.015)
        degrees = per_person.loc[per_person["segment"] == segment, "count"].to_numpy()
        mu = math.log(mean_rows) - sigma ** 2 / 2 + DEGREE_SHIFT[index]
        # P(degree <= k) = P(X < k + 1) below the cap: floor of a lognormal, at least 1
        ks = max(abs((degrees <= k).mean() - _normal_cdf((math.log(k + 1) - mu) / sigma)) for k in range(1, cap))
        assert ks < 1.63 / math.sqrt(len(degrees)), segment  # the KS test's 1 % critical value


@pytest.mark.parametrize("preference", [0.8, 0.0])
def test_a_persons_channel_is_reused_with_probability_p(spark, preference):
    df = keyed_people(spark, 3_000, preference=preference, seed=2)
    per_channel = df.groupBy(KEY, "channel").count()
    same = per_channel.agg(F.sum(F.col("count") * (F.col("count") - 1))).first()[0]
    degrees = df.groupBy(KEY).count().agg(F.sum(F.col("count") * (F.col("count") - 1))).first()[0]
    q, r = preference + (1 - preference) / len(CHANNELS), (1 - preference) / len(CHANNELS)
    # two rows of one person share a channel with probability q^2 + (channels - 1) r^2
    assert same / degrees == pytest.approx(q ** 2 + (len(CHANNELS) - 1) * r ** 2, abs=0.015)


def test_a_persons_amounts_keep_to_their_spend_level(spark):
    import numpy as np

    df = keyed_people(spark, 3_000, seed=4).select(KEY, "segment", "amount").toPandas()  # generated, public
    df["band"] = np.searchsorted(AMOUNT_EDGES, df["amount"], side="right") - 1
    pairs = lambda counts: (counts * (counts - 1)).sum()  # noqa: E731 - ordered pairs of distinct rows
    # two rows of one person share a band with probability at least 0.6^2 (both in the usual band) ...
    within = pairs(df.groupby([KEY, "band"]).size()) / pairs(df.groupby(KEY).size())
    # ... well above two rows of one segment (most pairs from two persons, whose usual bands differ w.p. 2/3)
    between = pairs(df.groupby(["segment", "band"]).size()) / pairs(df.groupby("segment").size())
    assert within > 0.6 ** 2 and within - between > 0.15, (within, between)


@pytest.mark.slow
def test_the_flat_and_parent_child_forms_hold_the_same_people(spark):
    flat = keyed_people(spark, 2_000, seed=9)
    persons, orders = keyed_people_tables(spark, 2_000, seed=9, partitions=3)
    assert flat.columns == [KEY, *PERSON_COLUMNS, *ROW_COLUMNS]
    assert persons.columns == [KEY, *PERSON_COLUMNS] and orders.columns == [KEY, *ROW_COLUMNS]
    assert persons.count() == persons.select(KEY).distinct().count() == 2_000
    assert orders.join(persons, KEY, "left_anti").count() == 0
    joined = orders.join(persons, KEY).select(*flat.columns)
    assert flat.exceptAll(joined).count() == 0 and joined.exceptAll(flat).count() == 0
    constant = flat.groupBy(KEY).agg(*[F.countDistinct(c).alias(c) for c in PERSON_COLUMNS])
    assert constant.agg(*[F.max(c) for c in PERSON_COLUMNS]).first() == tuple([1] * len(PERSON_COLUMNS))
    assert flat.agg(F.min("amount"), F.max("amount")).first()[0] >= 0


def test_the_schema_declares_the_generated_table():
    with open(SCHEMA_PATH) as handle:
        doc = yaml.safe_load(handle)
    schema = parse_schema(doc)
    assert schema.people is not None
    assert schema.people.to_document() == {"id": KEY, "person_columns": list(PERSON_COLUMNS), "summaries": [
        "channel", "amount"], "max_rows_per_person": MAX_ROWS_PER_PERSON}
    assert schema.privacy_unit.id_columns == (KEY,) and schema.privacy_unit.max_rows_per_id <= MAX_ROWS_PER_PERSON
    values = {c.name: list(c.values) for c in schema.columns if isinstance(c, CategoricalColumn)}
    assert values == {**{name: list(spec) for name, spec in PERSON_COLUMNS.items()}, "channel": list(CHANNELS),
                      "category": list(CATEGORIES)}
    assert [c.name for c in schema.columns] == [*PERSON_COLUMNS, *ROW_COLUMNS]
