"""Code columns for the evaluation jobs: codes without status in Spark SQL, the held-out split, labels.

The marginal engine only returns count tables. The classifier and the exact-match check need rows,
so they work on the codes themselves, split from the encoded columns with Spark expressions
(``encode.code_column``); nothing leaves the executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from privsyn_spark.measure.encode import EncodedTable, code_column
from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn, integer_bin_bounds

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def unpacked_codes(encoded: EncodedTable) -> Any:
    """The encoded table as one int code column per attribute (named as the attribute), lazily."""
    return encoded.df.select(*[code_column(encoded.df, a).cast("int").alias(a) for a in encoded.domain.attrs])


def holdout_split(df: DataFrame, test_fraction: float, seed: int) -> Any:
    """``(rest, holdout)``: a seeded random split of rows (``DataFrame.randomSplit``).

    Deterministic for a given seed and input (same files, same partitioning). A row-level draw,
    not a hash of the row's content, so duplicate rows can land on both sides, as fresh draws would.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rest, holdout = df.randomSplit([1.0 - test_fraction, test_fraction], seed=seed)
    return rest, holdout


def code_labels(column: Column) -> list[str]:
    """A short label per code of ``column``: values, bins, then ``(other)`` and ``(null)``."""
    if isinstance(column, CategoricalColumn):
        labels = [str(v) for v in column.values]
    elif isinstance(column, NumericalColumn):
        edges = column.edge_array()
        if column.integer and column.dtype in ("int", "long"):
            lo, hi = integer_bin_bounds(edges)
            labels = [str(a) if a == b else f"{a}-{b}" for a, b in zip(lo, hi)]
        else:
            labels = [f"[{a:.4g}, {b:.4g})" for a, b in zip(edges[:-1], edges[1:])]
    else:  # pragma: no cover - every kept column is one of the two
        labels = [str(i) for i in range(column.base_size)]
    if column.other_code is not None:
        labels.append("(other)")
    if column.null_code is not None:
        labels.append("(null)")
    return labels
