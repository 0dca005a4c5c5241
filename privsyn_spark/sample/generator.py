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
