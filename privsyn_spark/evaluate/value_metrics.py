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

Every column is computed at once: both tables become one long frame of (column index ``c``, value ``x``),
counted once per distinct pair (``r``: real rows, ``s``: synthetic rows) and kept; each metric is then
one Spark job over those counts for all columns, not a few jobs per column.
Like every metric here, these read the private table and are not differentially private.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.measure.encode import numeric_value, raw_value
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

HISTOGRAM_BINS = 40
KS_BUCKETS = 64
"""Value ranges the KS distance is computed over in parallel (:func:`ks_distance`)."""
#: A column's value-level error is flagged when its KS distance is above this.
HIGH_KS = 0.1


def _long(df: DataFrame, values: Sequence[Column]) -> DataFrame:
    """One row (``c``, ``x``) per row of ``df`` and value column ``values[c]``; nulls and NaN dropped."""
    from pyspark.sql import functions as F

    pairs = F.explode(F.array(*[F.struct(F.lit(i).alias("c"), v.cast("double").alias("x"))
                                for i, v in enumerate(values)])).alias("v")
    return df.select(pairs).select("v.c", "v.x").where(F.col("x").isNotNull() & ~F.isnan("x"))


def _per_value(real: DataFrame, synthetic: DataFrame) -> DataFrame:
    """Real (``r``) and synthetic (``s``) rows of each distinct (``c``, ``x``) of two long frames."""
    from pyspark.sql import functions as F

    both = (real.select("c", "x", F.lit(1).alias("r"), F.lit(0).alias("s"))
            .unionByName(synthetic.select("c", "x", F.lit(0).alias("r"), F.lit(1).alias("s"))))
    return both.groupBy("c", "x").agg(F.sum("r").alias("r"), F.sum("s").alias("s"))


def _lookup(values: Mapping[int, Any], key: Column, element: str = "double") -> Column:
    """``values[key]`` as a Spark column (a literal map; null for a key it does not hold)."""
    from pyspark.sql import functions as F

    if not values:
        return F.lit(None).cast(element)
    pairs = [F.lit(v).cast(element) if not isinstance(v, list) else F.array(*[F.lit(float(e)) for e in v])
             .cast(element) for v in values.values()]
    return F.element_at(F.create_map(*[x for k, v in zip(values, pairs) for x in (F.lit(k), v)]), key)


def _below(x: Column, edges: Column) -> Column:
    """How many of the ``edges`` (an array column) are at most ``x``: the index of x's range or bin."""
    from pyspark.sql import functions as F

    return F.coalesce(F.size(F.filter(edges, lambda e: x >= e)), F.lit(0))


def _ranged(per_value: DataFrame, totals: Mapping[int, tuple[float, float]], buckets: int) -> DataFrame:
    """The counts of the columns both tables hold values of, each cut into up to ``buckets`` contiguous
    ranges ``b`` (at approximate quantiles of its distinct values). A window per range then gives
    cumulative counts in parallel: a window over the whole table would move every row into one partition
    (Spark warns of it and runs it on one core)."""
    from pyspark.sql import functions as F

    kept = per_value.where(F.col("c").isin(list(totals)))
    cuts = [i / buckets for i in range(1, buckets)]
    bounds: dict[int, list[float]] = {c: [] for c in totals}
    if cuts:
        for row in kept.groupBy("c").agg(F.percentile_approx("x", cuts, 1000).alias("q")).collect():
            bounds[int(row["c"])] = sorted(set(row["q"]))
    return kept.withColumn("b", _below(F.col("x"), _lookup(bounds, F.col("c"), "array<double>")))


def _local_gaps(ranged: DataFrame, totals: Mapping[int, tuple[float, float]]) -> DataFrame:
    """Per value: ``c``, its range ``b``, ``x`` and ``d``, the CDF gap F_real - F_synthetic within its range."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    nr = _lookup({c: t[0] for c, t in totals.items()}, F.col("c"))
    ns = _lookup({c: t[1] for c, t in totals.items()}, F.col("c"))
    window = Window.partitionBy("c", "b").orderBy("x").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return ranged.select("c", "b", "x", "r", "s", (F.sum("r").over(window) / nr - F.sum("s").over(window) / ns)
                         .alias("d"))


def _offsets(rows: list[Any], nr: float, ns: float) -> dict[int, float]:
    """The CDF gap the ranges before each range add (one column's ranges ``b`` in order, with their ``r``, ``s``)."""
    out, before_r, before_s = {}, 0.0, 0.0
    for row in rows:
        out[int(row["b"])] = before_r / nr - before_s / ns
        before_r, before_s = before_r + float(row["r"]), before_s + float(row["s"])
    return out


def _by_column(rows: list[Any]) -> dict[int, list[Any]]:
    """Rows grouped by their ``c``, each column's in the order of its ranges ``b``."""
    out: dict[int, list[Any]] = {}
    for row in sorted(rows, key=lambda r: (int(r["c"]), int(r["b"]))):
        out.setdefault(int(row["c"]), []).append(row)
    return out


def _tops(per_value: DataFrame) -> dict[int, tuple[float, float, float]]:
    """Each column's real and synthetic values and its most frequent real value (the smallest of a tie; NaN
    when the real table has none)."""
    from pyspark.sql import functions as F

    rows = per_value.groupBy("c").agg(
        F.sum("r").alias("nr"), F.sum("s").alias("ns"),
        F.max(F.when(F.col("r") > 0, F.struct(F.col("r"), (-F.col("x")).alias("neg")))).alias("top")).collect()
    return {int(r["c"]): (float(r["nr"]), float(r["ns"]), -float(r["top"]["neg"]) if r["top"] else math.nan)
            for r in rows}


def _both(tops: Mapping[int, tuple[float, float, float]]) -> dict[int, tuple[float, float]]:
    """The real and synthetic values of the columns both tables hold values of (:func:`_tops`)."""
    return {c: (nr, ns) for c, (nr, ns, _) in tops.items() if nr and ns}


def _ks(per_value: DataFrame, totals: Mapping[int, tuple[float, float]], buckets: int) -> dict[int, float]:
    """The exact KS distance of each column of ``totals``: each value range sends its sums and the extremes
    of its local CDF gap to the driver, which adds the ranges before it (the gap at x is the offset of the
    earlier ranges plus the local gap)."""
    from pyspark.sql import functions as F

    if not totals:
        return {}
    rows = _local_gaps(_ranged(per_value, totals, buckets), totals).groupBy("c", "b").agg(
        F.sum("r").alias("r"), F.sum("s").alias("s"), F.max("d").alias("hi"), F.min("d").alias("lo")).collect()
    out = {}
    for c, ranges in _by_column(rows).items():
        offsets = _offsets(ranges, *totals[c])
        out[c] = max(max(abs(offsets[int(r["b"])] + float(r["hi"])), abs(offsets[int(r["b"])] + float(r["lo"])))
                     for r in ranges)
    return out


def _one(df: DataFrame) -> DataFrame:
    """A one-column (``x``) DataFrame as a long frame of column 0."""
    from pyspark.sql import functions as F

    return _long(df, [F.col("x")])


def ks_distance(real: DataFrame, synthetic: DataFrame, buckets: int = KS_BUCKETS) -> float:
    """KS distance of two one-column (``x``) DataFrames, exact, computed in Spark without a global window."""
    per_value = _per_value(_one(real), _one(synthetic))
    return _ks(per_value, _both(_tops(per_value)), buckets).get(0, float("nan"))


def wasserstein_distance(real: DataFrame, synthetic: DataFrame, buckets: int = KS_BUCKETS) -> float:
    """Wasserstein-1 distance of two one-column (``x``) DataFrames, exact: the integral of
    |F_real - F_synthetic| (Vallender 1974), the sum over consecutive distinct values of the gap times the
    step; two passes over the value ranges of :func:`ks_distance` (sums and first values, then the
    integral with each range's offset)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_value = _per_value(_one(real), _one(synthetic))
    totals = _both(_tops(per_value))
    if not totals:
        return float("nan")
    ranged = _ranged(per_value, totals, buckets)
    rows = ranged.groupBy("c", "b").agg(F.sum("r").alias("r"), F.sum("s").alias("s"), F.min("x").alias("first")) \
        .orderBy("b").collect()
    offsets = _offsets(rows, *totals[0])
    following = {int(a["b"]): float(b["first"]) for a, b in zip(rows, rows[1:])}  # the last range: F gap is 0
    step = F.coalesce(F.lead("x").over(Window.partitionBy("c", "b").orderBy("x")), _lookup(following, F.col("b")),
                      F.col("x")) - F.col("x")
    local = _local_gaps(ranged, totals)
    total = local.select((F.abs(_lookup(offsets, F.col("b")) + F.col("d")) * step).alias("area")) \
        .agg(F.sum("area")).collect()[0][0]
    return float(total or 0.0)


def histogram_edges(column: NumericalColumn, skewed: bool) -> tuple[np.ndarray, bool]:
    """Plot bins over the column's bounds: log-spaced (of x - min + 1) when skewed and wide, else equal."""
    lo, hi = float(column.edges[0]), float(column.edges[-1])
    if skewed and hi - lo > 100:
        return lo - 1 + np.geomspace(1, hi - lo + 1, HISTOGRAM_BINS + 1), True
    return np.linspace(lo, hi, HISTOGRAM_BINS + 1), False


def _counts_of(per_value: DataFrame, watched: Mapping[int, list[float]]) -> dict[tuple[int, float], tuple[int, int]]:
    """Real and synthetic rows of each watched value of each column."""
    from pyspark.sql import functions as F

    wanted = [(F.col("c") == F.lit(c)) & F.col("x").isin(values) for c, values in watched.items() if values]
    if not wanted:
        return {}
    condition = wanted[0]
    for more in wanted[1:]:
        condition = condition | more
    return {(int(r["c"]), float(r["x"])): (int(r["r"]), int(r["s"])) for r in per_value.where(condition).collect()}


def _histograms(per_value: DataFrame, edges: Mapping[int, np.ndarray]) -> dict[int, tuple[list[int], list[int]]]:
    """Real and synthetic rows of each column in each of its bins (``edges``; the outer ones are open)."""
    from pyspark.sql import functions as F

    inner = {c: [float(e) for e in e_c[1:-1]] for c, e_c in edges.items()}
    index = _below(F.col("x"), _lookup(inner, F.col("c"), "array<double>"))
    rows = per_value.groupBy("c", index.alias("b")).agg(F.sum("r").alias("r"), F.sum("s").alias("s")).collect()
    out = {c: (np.zeros(len(e_c) - 1, dtype=np.int64), np.zeros(len(e_c) - 1, dtype=np.int64))
           for c, e_c in edges.items()}
    for r in rows:
        real, synthetic = out[int(r["c"])]
        real[int(r["b"])] += int(r["r"])
        synthetic[int(r["b"])] += int(r["s"])
    return {c: (real.tolist(), synthetic.tolist()) for c, (real, synthetic) in out.items()}


def value_metrics(real_df: DataFrame, synthetic_df: DataFrame, schema: Schema) -> dict[str, dict]:
    """Per numerical column of ``schema``: KS distance, spike shares, plot histograms (module docstring)."""
    from pyspark import StorageLevel

    columns = [c for c in schema.columns if isinstance(c, NumericalColumn)]
    if not columns:
        return {}

    def values(df: DataFrame) -> DataFrame:
        types = dict(df.dtypes)
        return _long(df, [numeric_value(raw_value(schema, c), c, types[c.name]) for c in columns])

    per_value = _per_value(values(real_df), values(synthetic_df)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tops = _tops(per_value)
        watched = {i: list(c.spikes) for i, c in enumerate(columns)}
        for i, (_, _, top) in tops.items():
            if not math.isnan(top) and top not in watched[i]:
                watched[i].append(top)
        counts = _counts_of(per_value, watched)
        ks = _ks(per_value, _both(tops), KS_BUCKETS)
        spikes, shapes = {}, {}
        for i, column in enumerate(columns):
            n_real, n_synth, _ = tops.get(i, (0.0, 0.0, math.nan))
            spikes[i] = [{"value": v, "declared": v in column.spikes,
                          "real": counts.get((i, v), (0, 0))[0] / n_real if n_real else math.nan,
                          "synthetic": counts.get((i, v), (0, 0))[1] / n_synth if n_synth else math.nan}
                         for v in watched[i]]
            shapes[i] = histogram_edges(column, any(spike["real"] > 0.5 for spike in spikes[i]))
        histograms = _histograms(per_value, {i: edges for i, (edges, _) in shapes.items()})
    finally:
        per_value.unpersist()
    out: dict[str, dict] = {}
    for i, column in enumerate(columns):
        n_real, n_synth, _ = tops.get(i, (0.0, 0.0, math.nan))
        distance = ks.get(i, math.nan)
        edges, log_x = shapes[i]
        out[column.name] = {
            "ks": distance,
            "high_error": bool(math.isfinite(distance) and distance > HIGH_KS),
            "spikes": spikes[i],
            "rows": {"real": int(n_real), "synthetic": int(n_synth)},
            "histogram": {"edges": edges.tolist(), "log_x": log_x, "real": histograms[i][0],
                          "synthetic": histograms[i][1]},
        }
    return out
