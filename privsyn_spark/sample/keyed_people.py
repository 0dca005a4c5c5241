"""A keyed table with a known people structure: customers and their orders, for the people model's tests
and bench (docs/people.md).

Every value is a hash of ``(seed, customer index, row index, draw)`` (``xxhash64`` mapped to a uniform
in (0, 1)), computed on the executors from ``spark.range``: deterministic per seed whatever the
partitioning, and the flat form and the parent-child form hold the same data. The structure:

- person columns ``segment``, ``region``, ``birth_band``, ``signup_month``, independent, with the
  probabilities of :data:`PERSON_COLUMNS`;
- the degree (rows of a person): ``min(M, max(1, floor(X)))`` with ``X`` lognormal,
  ``ln X ~ N(ln(mean_rows) - sigma^2/2 + DEGREE_SHIFT[segment], sigma^2)`` (heavy-tailed, by segment);
- a favourite channel drawn once per person (:data:`FAVOURITE_BY_BAND` of its birth band with
  probability 0.6, else uniform); each row's ``channel`` is the favourite with probability ``p``, else
  uniform over the channels;
- ``category``: ``(2 * channel + region) mod 8`` with probability 0.5, else uniform;
- a usual amount band drawn once per person, ``min(7, 2 * segment + j)`` with ``j`` uniform in {0, 1, 2}
  (a spend level);
- ``amount``: a band (edges :data:`AMOUNT_EDGES`) that is the person's usual band with probability 0.6,
  ``min(7, 2 * segment + category mod 3)`` with probability 0.25, else a band next to the usual one;
  uniform inside the band, in cents. A person's total amount grows with their degree, their segment and
  their spend level.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

SCHEMA_PATH = str(Path(__file__).with_name("keyed_people.schema.yaml"))
"""The schema document of the flat form, with its ``privacy_unit`` and ``people`` sections."""

KEY = "customer_id"
PERSON_COLUMNS: dict[str, dict[str, float]] = {
    "segment": {"consumer": 0.5, "small_business": 0.3, "corporate": 0.15, "public": 0.05},
    "region": {r: 1 / 6 for r in ("north", "south", "east", "west", "central", "islands")},
    "birth_band": {b: 1 / 7 for b in ("1940s", "1950s", "1960s", "1970s", "1980s", "1990s", "2000s")},
    "signup_month": {f"2024-{m:02d}": 1 / 12 for m in range(1, 13)},
}
"""Each person column's values and their probabilities."""
CHANNELS = ("store", "phone", "web", "app")
CATEGORIES = ("grocery", "home", "garden", "electronics", "clothing", "sports", "books", "travel")
AMOUNT_EDGES = (0.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
ROW_COLUMNS = ("channel", "category", "amount")
DEGREE_SHIFT = (-0.3, 0.0, 0.4, 0.8)
"""Added to the log-degree's mean, by segment (in the order of ``PERSON_COLUMNS["segment"]``)."""
FAVOURITE_BY_BAND = (0, 0, 1, 1, 2, 3, 3)
"""The usual favourite channel (index into CHANNELS) of each birth band."""
MAX_ROWS_PER_PERSON = 100
"""M, the public cap on a person's rows (the schema's ``people.max_rows_per_person``)."""


def _uniform(seed: int, *parts: Any) -> Column:
    """A uniform in (0, 1) that is a function of ``seed`` and the columns/values ``parts``."""
    from pyspark.sql import functions as F

    bits = F.pmod(F.xxhash64(F.lit(seed), *parts), F.lit(2 ** 53))
    return (bits + F.lit(0.5)) / F.lit(float(2 ** 53))


def _pick(u: Column, probabilities: list[float]) -> Column:
    """The index drawn by the uniform ``u`` from ``probabilities`` (inverse CDF)."""
    from pyspark.sql import functions as F

    out, cumulative = F.lit(len(probabilities) - 1), 0.0
    bounds = [cumulative := cumulative + p for p in probabilities[:-1]]
    for index in reversed(range(len(bounds))):
        out = F.when(u < F.lit(bounds[index]), F.lit(index)).otherwise(out)
    return out


def _label(index: Column, labels: tuple[str, ...]) -> Column:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(v) for v in labels]), index + 1)


def _persons(spark: SparkSession, people: int, mean_rows: float, sigma: float, max_rows: int, seed: int,
             partitions: int | None) -> DataFrame:
    """One row per person: the key, the person columns' indices, the degree ``_n``, ``_favourite`` and
    ``_spend`` (the usual amount band)."""
    from pyspark.sql import functions as F

    base = spark.range(0, people, numPartitions=partitions) if partitions else spark.range(0, people)
    draws = base.select(F.col("id").alias("_i"), F.format_string("C%010d", F.col("id")).alias(KEY),
                        *[_uniform(seed, F.col("id"), F.lit(j)).alias(f"_u{j}") for j in range(9)])
    u = [F.col(f"_u{j}") for j in range(9)]
    persons = draws.select("_i", KEY, *u, *[_pick(u[j], list(spec.values())).alias(name)
                                            for j, (name, spec) in enumerate(PERSON_COLUMNS.items())])
    z = F.sqrt(F.lit(-2.0) * F.log(u[4])) * F.cos(F.lit(2 * math.pi) * u[5])  # Box-Muller: a standard normal
    mu = F.lit(math.log(mean_rows) - sigma ** 2 / 2) + F.element_at(F.array(*map(F.lit, DEGREE_SHIFT)),
                                                                    F.col("segment") + 1)
    degree = F.least(F.lit(max_rows), F.greatest(F.lit(1), F.floor(F.exp(mu + F.lit(sigma) * z)))).cast("int")
    usual = F.element_at(F.array(*map(F.lit, FAVOURITE_BY_BAND)), F.col("birth_band") + 1)
    favourite = F.when(u[6] < 0.6, usual).otherwise(F.floor(u[7] * len(CHANNELS)))
    spend = F.least(F.lit(len(AMOUNT_EDGES) - 2), F.col("segment") * 2 + F.floor(u[8] * 3))
    return persons.select("_i", KEY, *PERSON_COLUMNS, degree.alias("_n"), favourite.cast("int").alias("_favourite"),
                          spend.cast("int").alias("_spend"))


def _rows(persons: DataFrame, preference: float, seed: int) -> DataFrame:
    """Every person's rows: the person's columns (indices) and the row columns."""
    from pyspark.sql import functions as F

    rows = persons.withColumn("_k", F.explode(F.sequence(F.lit(1), F.col("_n"))))
    rows = rows.select("*", *[_uniform(seed, F.col("_i"), F.col("_k"), F.lit(20 + j)).alias(f"_v{j}")
                              for j in range(7)])
    u = [F.col(f"_v{j}") for j in range(7)]
    channel = F.when(u[0] < preference, F.col("_favourite")).otherwise(F.floor(u[1] * len(CHANNELS)))
    rows = rows.withColumn("_channel", channel.cast("int"))
    category = F.when(u[2] < 0.5, (F.col("_channel") * 2 + F.col("region")) % len(CATEGORIES)) \
        .otherwise(F.floor(u[3] * len(CATEGORIES)))
    rows = rows.withColumn("_category", category.cast("int"))
    bands = len(AMOUNT_EDGES) - 1
    beside = F.when(F.col("_spend") == 0, 1).when(F.col("_spend") == bands - 1, bands - 2) \
        .otherwise(F.col("_spend") + F.when(u[5] < 0.5, -1).otherwise(1))
    band = F.when(u[4] < 0.6, F.col("_spend")) \
        .when(u[4] < 0.85, F.least(F.lit(bands - 1), F.col("segment") * 2 + F.col("_category") % 3)) \
        .otherwise(beside).cast("int") + 1
    low = F.element_at(F.array(*map(F.lit, AMOUNT_EDGES[:-1])), band)
    high = F.element_at(F.array(*map(F.lit, AMOUNT_EDGES[1:])), band)
    amount = F.round(low + u[6] * (high - low), 2)
    return rows.select("_i", "_k", KEY, *PERSON_COLUMNS, _label(F.col("_channel"), CHANNELS).alias("channel"),
                       _label(F.col("_category"), CATEGORIES).alias("category"), amount.alias("amount"))


def _labelled(df: DataFrame) -> DataFrame:
    """The person columns' indices replaced by their values."""
    for name, spec in PERSON_COLUMNS.items():
        df = df.withColumn(name, _label(df[name], tuple(spec)))
    return df


def keyed_people_tables(spark: SparkSession, people: int, mean_rows: float = 21.5, sigma: float = 1.0,
                        preference: float = 0.8, max_rows: int = MAX_ROWS_PER_PERSON, seed: int = 0,
                        partitions: int | None = None) -> tuple[DataFrame, DataFrame]:
    """The parent-child form: ``(persons, orders)``; ``persons`` has one row per ``customer_id`` with the
    person columns, ``orders`` the key as a foreign key and the row columns (``preference`` is p)."""
    persons = _persons(spark, people, mean_rows, sigma, max_rows, seed, partitions)
    orders = _rows(persons, preference, seed).select(KEY, *ROW_COLUMNS)
    return _labelled(persons).select(KEY, *PERSON_COLUMNS), orders


def keyed_people(spark: SparkSession, people: int, mean_rows: float = 21.5, sigma: float = 1.0,
                 preference: float = 0.8, max_rows: int = MAX_ROWS_PER_PERSON, seed: int = 0,
                 partitions: int | None = None) -> DataFrame:
    """The flat form: one keyed table, ``customer_id``, the person columns (constant per id) and the row
    columns; the same rows as :func:`keyed_people_tables` joined on the key."""
    persons = _persons(spark, people, mean_rows, sigma, max_rows, seed, partitions)
    return _labelled(_rows(persons, preference, seed)).select(KEY, *PERSON_COLUMNS, *ROW_COLUMNS)
