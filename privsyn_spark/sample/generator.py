"""Generated tables with a known dependency structure, for scale tests and benchmarks.

Rows are made on the executors from ``spark.range`` with Spark SQL expressions (no driver data).
Attribute ``x{j}`` copies a function of ``x{j-1}`` with probability ``dependence`` and is uniform
otherwise, so the dependent pairs are exactly the chain ``(x{j-1}, x{j})`` for j in ``dependent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


def generated_table(spark: SparkSession, rows: int, sizes: Sequence[int], dependent: Sequence[int] = (),
                    dependence: float = 0.8, seed: int = 0, partitions: int | None = None) -> Any:
    """A DataFrame of ``rows`` rows with int columns ``x0..x{d-1}``, ``x{j}`` in ``[0, sizes[j])``."""
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=partitions) if partitions else spark.range(0, rows)
    cols = []
    for j, size in enumerate(sizes):
        uniform = F.floor(F.rand(seed * 1000 + 2 * j) * size).cast("int")
        if j in dependent and j > 0:
            parent = F.col(f"x{j - 1}")
            copied = ((parent * 7 + 3) % size).cast("int")
            expr = F.when(F.rand(seed * 1000 + 2 * j + 1) < dependence, copied).otherwise(uniform)
        else:
            expr = uniform
        df = df.withColumn(f"x{j}", expr)
        cols.append(f"x{j}")
    return df.select(*cols)


def generated_schema(sizes: Sequence[int]) -> dict:
    """The schema document (as a dict) declaring the generated table's public domain."""
    return {"columns": [{"name": f"x{j}", "type": "categorical", "values": list(range(s)), "dtype": "int"}
                        for j, s in enumerate(sizes)]}


def bayes_net_structure(columns: int, min_size: int = 2, max_size: int = 60, max_parents: int = 2,
                        seed: int = 0) -> tuple[list[int], list[tuple[int, ...]]]:
    """Sizes and parents of a random Bayesian network over ``x0..x{columns-1}``.

    Column ``j`` has up to ``max_parents`` parents drawn among the earlier columns (none for ``x0``).
    Deterministic in ``seed``; public (it is the generator's own design, not data).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(min_size, max_size + 1, size=columns)]
    parents: list[tuple[int, ...]] = [()]
    for j in range(1, columns):
        k = int(rng.integers(0, min(max_parents, j) + 1))
        parents.append(tuple(sorted(int(p) for p in rng.choice(j, size=k, replace=False))))
    return sizes, parents


def bayes_net_table(spark: SparkSession, rows: int, sizes: Sequence[int], parents: Sequence[tuple[int, ...]],
                    dependence: float = 0.7, seed: int = 0, partitions: int | None = None) -> Any:
    """Rows of the network from :func:`bayes_net_structure`, made on the executors.

    ``x{j}`` is a fixed function of its parents (``(7 p1 + 13 p2 + 3) mod size``) with probability
    ``dependence`` and uniform otherwise, so the dependent pairs are exactly ``(parent, child)``.
    """
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=partitions) if partitions else spark.range(0, rows)
    for j, size in enumerate(sizes):
        uniform = F.floor(F.rand(seed * 100_003 + 2 * j) * size).cast("int")
        if parents[j]:
            mixed = F.lit(3)
            for weight, p in zip((7, 13), parents[j]):
                mixed = mixed + F.col(f"x{p}") * weight
            expr = (F.when(F.rand(seed * 100_003 + 2 * j + 1) < dependence, (mixed % size).cast("int"))
                    .otherwise(uniform))
        else:
            expr = uniform
        df = df.withColumn(f"x{j}", expr)
    return df.select(*[f"x{j}" for j in range(len(sizes))])


def dependent_pairs(parents: Sequence[tuple[int, ...]]) -> list[tuple[str, str]]:
    """The (parent, child) attribute pairs of the network, as column-name pairs."""
    return [(f"x{p}", f"x{j}") for j, ps in enumerate(parents) for p in ps]


#: Sizes of the people table's columns: person attributes (constant per id), then per-row ones.
PERSON_SIZES = {"age_band": 8, "region": 10, "segment": 5}
ROW_SIZES = {"channel": 6, "category": 12, "amount_band": 10, "weekday": 7}


def people_table(spark: SparkSession, people: int, mean_rows: float = 20.0, alpha: float = 1.5,
                 max_rows: int = 10_000, seed: int = 0, partitions: int | None = None) -> Any:
    """A table of many rows per person: ``person_id`` (bigint), person attributes ``age_band``,
    ``region``, ``segment`` (constant per id) and per-row attributes ``channel``, ``category``,
    ``amount_band``, ``weekday`` that depend on them and on how active the person is.

    Rows per person are heavy-tailed: ``min(max_rows, floor(x_m U^(-1/alpha)))`` (Pareto with shape
    ``alpha``; ``x_m`` chosen so that the mean is about ``mean_rows``). Heavy users behave differently
    (their ``channel`` depends on their activity), so truncating them biases the table: what
    contribution bounding costs. Made on the executors (``spark.range`` + ``explode``).
    """
    from pyspark.sql import functions as F

    x_m = mean_rows * (alpha - 1.0) / alpha
    base = spark.range(0, people, numPartitions=partitions) if partitions else spark.range(0, people)
    u = F.greatest(F.rand(seed * 1000 + 1), F.lit(1e-12))
    n = F.least(F.lit(max_rows), F.greatest(F.lit(1), F.floor(F.lit(x_m) * F.pow(u, -1.0 / alpha)))).cast("int")
    person = base.select(
        F.col("id").alias("person_id"), n.alias("_n"),
        F.floor(F.rand(seed * 1000 + 2) * PERSON_SIZES["age_band"]).cast("int").alias("age_band"),
        F.floor(F.rand(seed * 1000 + 3) * PERSON_SIZES["region"]).cast("int").alias("region"))
    person = person.withColumn("segment", ((F.col("age_band") + F.floor(F.rand(seed * 1000 + 4) * 2))
                                           % PERSON_SIZES["segment"]).cast("int"))
    rows = person.withColumn("_i", F.explode(F.sequence(F.lit(1), F.col("_n"))))
    activity = F.least(F.floor(F.log2(F.col("_n"))), F.lit(5)).cast("int")  # 0 (1 row) .. 5 (32+ rows)
    noise = [F.rand(seed * 1000 + 10 + j) for j in range(6)]
    channel = F.when(noise[0] < 0.7, (activity + F.col("segment")) % ROW_SIZES["channel"]) \
        .otherwise(F.floor(noise[1] * ROW_SIZES["channel"]))
    rows = rows.withColumn("channel", channel.cast("int"))
    category = F.when(noise[2] < 0.6, (F.col("channel") * 2 + F.col("region")) % ROW_SIZES["category"]) \
        .otherwise(F.floor(noise[3] * ROW_SIZES["category"]))
    rows = rows.withColumn("category", category.cast("int"))
    amount = F.when(noise[4] < 0.6, (F.col("age_band") + F.floor(F.col("category") / 3)) % ROW_SIZES["amount_band"]) \
        .otherwise(F.floor(noise[5] * ROW_SIZES["amount_band"]))
    rows = rows.withColumn("amount_band", amount.cast("int"))
    rows = rows.withColumn("weekday", F.floor(F.rand(seed * 1000 + 20) * ROW_SIZES["weekday"]).cast("int"))
    return rows.select("person_id", *PERSON_SIZES, *ROW_SIZES)


def people_schema(max_rows_per_id: int | None = None) -> dict:
    """The schema document of :func:`people_table` (``person_id`` dropped; with ``max_rows_per_id`` its
    ``privacy_unit`` section)."""
    sizes = {**PERSON_SIZES, **ROW_SIZES}
    doc: dict = {"columns": [{"name": "person_id", "type": "drop"}]
                 + [{"name": c, "type": "categorical", "values": list(range(s)), "dtype": "int"}
                    for c, s in sizes.items()]}
    if max_rows_per_id is not None:
        doc["privacy_unit"] = {"id": "person_id", "max_rows_per_id": int(max_rows_per_id)}
    return doc


#: Shares of 1 of the binary table's columns, by group of four (a flag's prevalence: common to rare).
BINARY_SHARES = (0.5, 0.25, 0.1, 0.03, 0.01, 0.3)
#: Chance that a dependent flag copies its parent (else it is drawn at its own share).
BINARY_COPY = 0.8


def binary_structure(columns: int = 24) -> tuple[list[float], list[tuple[int, ...]]]:
    """Shares of 1 and parents of the binary table's flags ``x0..x{columns-1}``, in groups of four: a flag at
    the group's share (:data:`BINARY_SHARES`), a chain of two flags depending on it, and an independent one."""
    shares = [BINARY_SHARES[(j // 4) % len(BINARY_SHARES)] for j in range(columns)]
    parents: list[tuple[int, ...]] = [(j - 1,) if j % 4 in (1, 2) else () for j in range(columns)]
    return shares, parents


def binary_table(spark: SparkSession, rows: int, columns: int = 24, seed: int = 0,
                 partitions: int | None = None) -> Any:
    """Rows of ``columns`` 0/1 flags with the structure of :func:`binary_structure`, made on the executors: a
    dependent flag copies its parent with probability :data:`BINARY_COPY`, else it is 1 at its share."""
    from pyspark.sql import functions as F

    shares, parents = binary_structure(columns)
    df = spark.range(0, rows, numPartitions=partitions) if partitions else spark.range(0, rows)
    for j, (share, parent) in enumerate(zip(shares, parents)):
        own = (F.rand(seed * 100_003 + 2 * j) < share).cast("int")
        if parent:
            own = F.when(F.rand(seed * 100_003 + 2 * j + 1) < BINARY_COPY, F.col(f"x{parent[0]}")).otherwise(own)
        df = df.withColumn(f"x{j}", own)
    return df.select(*[f"x{j}" for j in range(columns)])
