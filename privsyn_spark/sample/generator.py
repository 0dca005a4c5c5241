"""Generated tables with a known dependency structure, for scale tests and benchmarks.

Rows are made on the executors from ``spark.range`` with Spark SQL expressions (no driver data).
Attribute ``x{j}`` copies a function of ``x{j-1}`` with probability ``dependence`` and is uniform
otherwise, so the dependent pairs are exactly the chain ``(x{j-1}, x{j})`` for j in ``dependent``.
"""

from __future__ import annotations

from collections.abc import Sequence


def generated_table(spark, rows: int, sizes: Sequence[int], dependent: Sequence[int] = (),
                    dependence: float = 0.8, seed: int = 0, partitions: int | None = None):
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
