"""Spark side of private domain discovery: exact counts for ``privsyn_spark.privacy.discovery``.

Only count arrays and (value, count) tallies reach the driver, and they go straight into the
privacy code, which noises them; nothing here is logged or returned to a caller otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.measure.instant_seconds import epoch_seconds
from privsyn_spark.runtime.backend import backend_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


def cleaned(name: str, null_tokens: Sequence[str]) -> Column:
    """Column ``name`` with the null tokens (after trimming) turned into nulls: the one null-token rule
    of drafts and of the encoder."""
    from pyspark.sql import functions as F

    col = F.col(f"`{name}`")
    if null_tokens:
        col = F.when(F.trim(col.cast("string")).isin(*null_tokens), F.lit(None)).otherwise(col)
    return col


def as_number(col: Column, source_type: str, temporal: bool) -> Any:
    """Numbers as doubles; dates/timestamps as epoch seconds read as the encoder reads them
    (:func:`~privsyn_spark.measure.instant_seconds.epoch_seconds`: wall-clock values as UTC, whatever the session
    time zone); unparseable values as null."""
    if temporal:
        return epoch_seconds(col, source_type, "timestamp")
    return col.try_cast("double")


def parsed_text(col: Column, sql_type: str) -> Any:
    """The trimmed text of ``col`` as ``sql_type`` (null when it does not parse): the one parse of a declared
    (``--dtype``) or tested type of an untyped column."""
    from pyspark.sql import functions as F

    return F.trim(col.cast("string")).try_cast(sql_type)


def type_counts(df: DataFrame, names: Sequence[str], types: Sequence[tuple[str, str]],
                null_tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Per column of ``names``: its non-null values (``null_tokens`` are null), then per ``(dtype, sql_type)`` of
    ``types`` the values that do not parse as it (a ``date`` also when the text holds more than a date), in one
    aggregation."""
    from pyspark.sql import functions as F

    aggregates = []
    for i, name in enumerate(names):
        col = cleaned(name, null_tokens)
        present = col.isNotNull()
        aggregates.append(F.count_if(present).alias(f"n{i}"))
        for j, (dtype, sql_type) in enumerate(types):
            fits = parsed_text(col, sql_type).isNotNull()
            if dtype == "date":
                fits = fits & (F.length(F.trim(col.cast("string"))) <= 10)
            aggregates.append(F.count_if(present & ~fits).alias(f"m{i}_{j}"))
    row = df.agg(*aggregates).first()
    assert row is not None  # a global aggregation has one row
    return {name: np.asarray([row[f"n{i}"] or 0] + [row[f"m{i}_{j}"] or 0 for j in range(len(types))],
                             dtype=np.int64) for i, name in enumerate(names)}


def category_counts(df: DataFrame, name: str, null_tokens: Sequence[str], boolean: bool = False) -> tuple[dict, int]:
    """Exact count of every (trimmed) value of a column, and its null count (one Spark job)."""
    from pyspark.sql import functions as F

    col = cleaned(name, null_tokens)
    value = col.try_cast("boolean") if boolean else F.trim(col.cast("string"))
    rows = df.select(value.alias("v")).groupBy("v").count().collect()
    counts = {r["v"]: int(r["count"]) for r in rows if r["v"] is not None}
    nulls = sum(int(r["count"]) for r in rows if r["v"] is None)
    return counts, nulls


def grid_counts(df: DataFrame, grids: Mapping[str, tuple[np.ndarray, float, float, bool]],
                null_tokens: Sequence[str]) -> dict[str, tuple[np.ndarray, int, int]]:
    """Per numeric column: exact count of each grid cell, the null count and the count of values beyond
    [lower, upper], in one pass.

    ``grids[name] = (starts, lower, upper, temporal)``: values are clamped to [lower, upper] and
    counted in cell ``searchsorted(starts, x, 'right') - 1`` (and, when clamped, as beyond); nulls,
    NaN and unparseable values count as null.
    """
    import pyarrow as pa

    names = list(grids)
    if not names:
        return {}
    sizes = [len(grids[n][0]) + 2 for n in names]  # cells, nulls, beyond
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    starts = [np.asarray(grids[n][0], dtype=np.float64) for n in names]
    bounds = [(float(grids[n][1]), float(grids[n][2])) for n in names]
    types = dict(df.dtypes)
    selected = df.select(*[as_number(cleaned(n, null_tokens), types[n], grids[n][3]).alias(f"c{i}")
                           for i, n in enumerate(names)])

    def count(batches: Iterator[Any]) -> Any:
        acc = np.zeros(int(offsets[-1]), dtype=np.int64)
        for batch in batches:
            for j in range(len(names)):
                x = batch.column(j).to_numpy(zero_copy_only=False).astype(np.float64)
                missing = np.isnan(x)
                present = x[~missing]
                cells = np.searchsorted(starts[j], np.clip(present, *bounds[j]), side="right") - 1
                part = np.bincount(np.maximum(cells, 0), minlength=sizes[j] - 2)
                acc[offsets[j]:offsets[j] + sizes[j] - 2] += part
                acc[offsets[j + 1] - 2] += int(missing.sum())
                acc[offsets[j + 1] - 1] += int(np.sum((present < bounds[j][0]) | (present > bounds[j][1])))
        yield pa.RecordBatch.from_arrays([pa.array([acc.tobytes()], type=pa.binary())], ["counts"])

    zero = np.zeros(int(offsets[-1]), dtype=np.int64)
    partials = selected.mapInArrow(count, "counts binary")
    summed = backend_of(df.sparkSession).sum_vectors(partials, "counts")
    total = zero if summed is None else summed
    return {n: (total[offsets[j]:offsets[j + 1] - 2], int(total[offsets[j + 1] - 2]), int(total[offsets[j + 1] - 1]))
            for j, n in enumerate(names)}


def whole_number_counts(df: DataFrame, name: str, null_tokens: Sequence[str], temporal: bool,
                        ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Exact count of every whole number in each inclusive range, concatenated in range order."""
    from pyspark.sql import functions as F

    x = as_number(cleaned(name, null_tokens), dict(df.dtypes)[name], temporal)
    inside: Any = None
    for lo, hi in ranges:
        term = (x >= lo) & (x <= hi)
        inside = term if inside is None else inside | term
    rows = (df.select(x.alias("x"), inside.alias("inside")).where(F.col("inside") & (F.col("x") == F.floor("x")))
            .groupBy("x").count().collect())
    found = {int(r["x"]): int(r["count"]) for r in rows}
    return np.asarray([found.get(v, 0) for lo, hi in ranges for v in range(lo, hi + 1)], dtype=np.int64)


def rows_per_id_cells(df: Any, id_columns: Sequence[str], starts: np.ndarray) -> np.ndarray:
    """Exact number of ids per cell of a grid of rows per id (``starts``: the cells' first whole numbers);
    a row with a null id is an id of one row. Two aggregations; only (rows, ids) tallies reach the driver."""
    from pyspark.sql import functions as F

    ids = [F.col(f"`{c}`") for c in id_columns]
    null_id = F.lit(False)
    for c in ids:
        null_id = null_id | c.isNull()
    salt = F.when(null_id, F.monotonically_increasing_id())  # a null id: a group of its own
    per_id = df.select(*[c.alias(f"k{i}") for i, c in enumerate(ids)], salt.alias("salt")) \
        .groupBy(*[f"k{i}" for i in range(len(ids))], "salt").count()
    tallies = per_id.groupBy("count").count().collect()
    n = np.asarray([int(r[0]) for r in tallies], dtype=np.int64)
    how_many = np.asarray([int(r[1]) for r in tallies], dtype=np.int64)
    cells = np.clip(np.searchsorted(starts, n, side="right") - 1, 0, len(starts) - 1)
    return np.bincount(cells, weights=how_many, minlength=len(starts)).astype(np.int64)
