"""Value-level fidelity of numeric columns (beside the binned TVDs): KS distance, spike shares, histograms.

Binned metrics cannot see values drawn badly inside a bin (a 46 % share of hours = 40 spread over
a 10-hour bin keeps its bin's TVD at 0). Here, per numerical column of the schema, computed in
Spark for any size (only a handful of numbers per column reach the driver):

- ``ks``: the Kolmogorov-Smirnov distance max_x |F_real(x) - F_synthetic(x)| over non-null values
  (exact: cumulative counts per distinct value, in a Spark window per range of values; the
  Wasserstein-1 distance is computed the same way, for the people metrics);
- ``spikes``: the share of each spike value of the schema, and of the real column's most frequent
  value, in both tables;
- ``histogram``: counts of both tables in ``HISTOGRAM_BINS`` equal-width bins over the column's
  bounds (log-spaced when the column is skewed), for the report's plots.
Like every metric here, these read the private table and are not differentially private.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.measure.encode import numeric_value, raw_value
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

HISTOGRAM_BINS = 40
KS_BUCKETS = 64
"""Value ranges the KS distance is computed over in parallel (:func:`ks_distance`)."""
#: A column's value-level error is flagged when its KS distance is above this.
HIGH_KS = 0.1


def _values(df: DataFrame, schema: Schema, column: NumericalColumn) -> Any:
    """The column as doubles (dates/timestamps as epoch seconds), null tokens as nulls; nulls dropped."""
    from pyspark.sql import functions as F


    number = numeric_value(raw_value(schema, column), column, dict(df.dtypes)[column.name])
    return df.select(number.alias("x")).where(F.col("x").isNotNull() & ~F.isnan("x"))


def _value_ranges(real: Any, synthetic: Any, buckets: int) -> tuple[Any, float, float] | None:
    """Counts of each distinct ``x`` in both tables (``r``, ``s``), cut into up to ``buckets`` contiguous
    ranges ``b`` (at approximate quantiles of the distinct values), with the two totals; None when a table
    is empty. A window per range then gives cumulative counts in parallel: a window over the whole table
    would move every row into one partition (Spark warns of it and runs it on one core)."""
    from pyspark.sql import functions as F

    both = (real.select("x", F.lit(1).alias("r"), F.lit(0).alias("s"))
            .unionByName(synthetic.select("x", F.lit(0).alias("r"), F.lit(1).alias("s"))))
    per_value = both.groupBy("x").agg(F.sum("r").alias("r"), F.sum("s").alias("s"))
    totals = per_value.agg(F.sum("r").alias("nr"), F.sum("s").alias("ns")).first()
    if not totals["nr"] or not totals["ns"]:
        return None
    cuts = [i / buckets for i in range(1, buckets)]
    bounds = sorted(set(per_value.approxQuantile("x", cuts, 0.001))) if cuts else []
    ranged = per_value.withColumn("b", sum((F.when(F.col("x") >= F.lit(b), 1).otherwise(0) for b in bounds),
                                           F.lit(0)))
    return ranged, float(totals["nr"]), float(totals["ns"])


def _local_gaps(ranged: Any, nr: float, ns: float) -> Any:
    """Per value: its range ``b``, ``x`` and ``d``, the CDF gap F_real - F_synthetic within its range."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy("b").orderBy("x").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return ranged.select("b", "x", "r", "s", (F.sum("r").over(window) / F.lit(nr)
                                              - F.sum("s").over(window) / F.lit(ns)).alias("d"))


def _offsets(rows: list[Any], nr: float, ns: float) -> dict[int, float]:
    """The CDF gap the ranges before each range add (ranges ``b`` in order, with their ``r``, ``s``)."""
    out, before_r, before_s = {}, 0.0, 0.0
    for row in rows:
        out[int(row["b"])] = before_r / nr - before_s / ns
        before_r, before_s = before_r + float(row["r"]), before_s + float(row["s"])
    return out


def ks_distance(real: Any, synthetic: Any, buckets: int = KS_BUCKETS) -> float:
    """KS distance of two one-column (``x``) DataFrames, exact, computed in Spark without a global window.

    Each value range (:func:`_value_ranges`) sends its sums and the extremes of its local CDF gap to the
    driver, which adds the ranges before it (the gap at x is the offset of the earlier ranges plus the
    local gap)."""
    from pyspark.sql import functions as F

    ranges = _value_ranges(real, synthetic, buckets)
    if ranges is None:
        return float("nan")
    ranged, nr, ns = ranges
    rows = _local_gaps(ranged, nr, ns).groupBy("b").agg(F.sum("r").alias("r"), F.sum("s").alias("s"),
                                                        F.max("d").alias("hi"), F.min("d").alias("lo")) \
        .orderBy("b").collect()
    offsets = _offsets(rows, nr, ns)
    return max(max(abs(offsets[int(row["b"])] + float(row["hi"])), abs(offsets[int(row["b"])] + float(row["lo"])))
               for row in rows)


def wasserstein_distance(real: Any, synthetic: Any, buckets: int = KS_BUCKETS) -> float:
    """Wasserstein-1 distance of two one-column (``x``) DataFrames, exact: the integral of
    |F_real - F_synthetic| (Vallender 1974), the sum over consecutive distinct values of the gap times the
    step; two passes over the value ranges of :func:`ks_distance` (sums and first values, then the
    integral with each range's offset)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ranges = _value_ranges(real, synthetic, buckets)
    if ranges is None:
        return float("nan")
    ranged, nr, ns = ranges
    rows = ranged.groupBy("b").agg(F.sum("r").alias("r"), F.sum("s").alias("s"), F.min("x").alias("first")) \
        .orderBy("b").collect()
    offsets = _offsets(rows, nr, ns)
    following = {int(a["b"]): float(b["first"]) for a, b in zip(rows, rows[1:])}  # the last range: F gap is 0
    offset = F.create_map(*[F.lit(v) for b, o in offsets.items() for v in (b, o)])
    after = F.create_map(*[F.lit(v) for b, x in following.items() for v in (b, x)]) if following else F.lit(None)
    step = F.coalesce(F.lead("x").over(Window.partitionBy("b").orderBy("x")), after[F.col("b")] if following
                      else F.lit(None), F.col("x")) - F.col("x")
    local = _local_gaps(ranged, nr, ns)
    total = local.select((F.abs(offset[F.col("b")] + F.col("d")) * step).alias("area")).agg(F.sum("area")).first()
    return float(total[0] or 0.0)


def _shares(df: Any, values: list[float]) -> tuple[int, list[float]]:
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n")] + [F.sum(F.when(F.col("x") == F.lit(v), 1).otherwise(0)).alias(f"v{i}")
                                             for i, v in enumerate(values)]
    row = df.agg(*aggs).first()
    n = int(row["n"] or 0)
    return n, [float(row[f"v{i}"] or 0) / n if n else float("nan") for i in range(len(values))]


def _histogram(df: DataFrame, edges: np.ndarray) -> list[int]:
    from pyspark.sql import functions as F

    inner = [float(e) for e in edges[1:-1]]
    index = sum((F.when(F.col("x") >= F.lit(e), 1).otherwise(0) for e in inner), F.lit(0))
    rows = df.groupBy(index.alias("b")).count().collect()
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    for r in rows:
        counts[int(r["b"])] += int(r["count"])
    return counts.tolist()


def histogram_edges(column: NumericalColumn, skewed: bool) -> tuple[np.ndarray, bool]:
    """Plot bins over the column's bounds: log-spaced (of x - min + 1) when skewed and wide, else equal."""
    lo, hi = float(column.edges[0]), float(column.edges[-1])
    if skewed and hi - lo > 100:
        return lo - 1 + np.geomspace(1, hi - lo + 1, HISTOGRAM_BINS + 1), True
    return np.linspace(lo, hi, HISTOGRAM_BINS + 1), False


def value_metrics(real_df: DataFrame, synthetic_df: DataFrame, schema: Schema) -> dict[str, dict]:
    """Per numerical column of ``schema``: KS distance, spike shares, plot histograms (module docstring)."""
    from pyspark.sql import functions as F

    out: dict[str, dict] = {}
    for column in schema.columns:
        if not isinstance(column, NumericalColumn):
            continue
        real, synthetic = _values(real_df, schema, column), _values(synthetic_df, schema, column)
        top = real.groupBy("x").count().orderBy(F.desc("count"), "x").first()
        watched = list(column.spikes)
        if top is not None and float(top["x"]) not in watched:
            watched.append(float(top["x"]))
        n_real, real_shares = _shares(real, watched)
        n_synth, synth_shares = _shares(synthetic, watched)
        ks = ks_distance(real, synthetic)
        skewed = bool(real_shares and max(real_shares) > 0.5)
        edges, log_x = histogram_edges(column, skewed)
        out[column.name] = {
            "ks": ks,
            "high_error": bool(math.isfinite(ks) and ks > HIGH_KS),
            "spikes": [{"value": v, "declared": v in column.spikes, "real": r, "synthetic": s}
                       for v, r, s in zip(watched, real_shares, synth_shares)],
            "rows": {"real": n_real, "synthetic": n_synth},
            "histogram": {"edges": edges.tolist(), "log_x": log_x, "real": _histogram(real, edges),
                          "synthetic": _histogram(synthetic, edges)},
        }
    return out
