"""Synthetic people and their rows: fresh keys, a degree per person, and each person's rows dealt from a pool.

Post-processing only, on Spark DataFrames of synthetic records (persons sampled from the person model,
a pool of rows sampled from the row model); nothing here reads the private table or its measurements
beyond the noisy degree histogram.

- :func:`key_persons`: each person gets a fresh key of 32 hex characters, the first 128 bits of
  SHA-256(salt, row index), the salt 128 bits from :mod:`secrets` drawn once per call on the driver
  and never kept. The indexes (``monotonically_increasing_id``) are distinct, so two persons share a key
  only if SHA-256 collides in 128 bits (probability below N^2 / 2^129). A key depends on no input value,
  and recomputing the persons gives the same keys as long as their rows come in the same order.
- :func:`draw_degrees`: a person's degree inside its ``_degree`` bin, from the noisy degree histogram
  (:mod:`privsyn_spark.privacy.people`).
- :func:`deal_rows`: each person takes ``degree`` rows of the pool whose signature (``_mode_*``, the
  person columns, ``_degree``) equals its own, unless that signature has fewer pool rows than the degree
  of a person of the signature: then the signature backs off by dropping its last column, then the next, down to the
  whole pool. Within the chosen signature, the persons (in a random order) take consecutive slots of the
  pool rows (in a random order), cycling through them when the persons ask for more rows than there are
  (sampling with replacement across persons, evenly), so no person gets a pool row twice while the pool
  holds its degree. Dealing a person more rows than its signature holds would repeat rows within the
  person: identical rows, too few distinct values and an inflated share of persons whose rows share one
  value. The person's own columns are then copied onto its rows and the derived ``_*`` columns dropped.

Randomness after the keys is a hash of the row and the seed (``xxhash64``), never of the partitioning:
the same persons, pool and seed give the same output. Every step is a join, an aggregation or a window
over a signature cut into hash buckets (up to :data:`BUCKETS`; a signature's pool one per
:data:`BUCKET_ROWS` rows), so the work is linear in rows and no large signature lands whole in one task.
Every join is hinted to a sort-merge join: both sides grow with the persons and rows, and Spark's size
estimate after an aggregation can be far below the truth, so a broadcast could exhaust the driver's
memory (it did at 10^6 persons). Signatures travel as 128-bit hash keys. The pool's
rows per signature and the back-off choice (one row per signature of the persons) are computed when
:func:`deal_rows` is called and cached (``persist``); the rows stay lazy, and the caller unpersists the
two once they are written.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.privacy.people import degrees_in_bins

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

DEGREE = "degree"
"""The int column :func:`draw_degrees` adds: the person's number of rows."""
BUCKETS = 64
"""Hash buckets a signature's rows are cut into to number them (the windows' partitions), at most."""
BUCKET_ROWS = 1 << 16
"""Pool rows per bucket a signature's pool is cut into, up to :data:`BUCKETS` buckets (a small signature: one)."""
_DEGREE_STREAM, _PERSON_ORDER_STREAM, _POOL_ORDER_STREAM = 1, 2, 3


def key_persons(persons: DataFrame, key: str) -> DataFrame:
    """``persons`` with a first column ``key``: a fresh random key of 32 hex characters per person (module
    docstring: how they are drawn and why they are unique)."""
    from pyspark.sql import functions as F

    if key in persons.columns:
        raise ValueError(f"the persons already have a column {key!r}; the key column needs a new name")
    salt = secrets.token_hex(16)
    index = F.monotonically_increasing_id().cast("string")
    fresh = F.substring(F.sha2(F.concat(F.lit(salt + ":"), index), 256), 1, 32)
    return persons.select(fresh.alias(key), *[F.col(f"`{c}`") for c in persons.columns])


def _order(columns: Sequence[str], seed: int, stream: int) -> Column:
    """A random order key per row: ``xxhash64`` of ``columns``, the seed and the stream."""
    from pyspark.sql import functions as F

    return F.xxhash64(*[F.col(f"`{c}`") for c in columns], F.lit(int(seed)), F.lit(stream))


def _uniform(columns: Sequence[str], seed: int, stream: int) -> Column:
    """A uniform in [0, 1) per row: 53 bits of ``xxhash64`` of ``columns``, the seed and the stream."""
    from pyspark.sql import functions as F

    return F.shiftrightunsigned(_order(columns, seed, stream), 11).cast("double") / float(1 << 53)


def draw_degrees(persons: DataFrame, degree_bin_col: str, noisy_hist: np.ndarray, seed: int) -> DataFrame:
    """``persons`` with an int column ``degree`` drawn inside the bin ``degree_bin_col`` holds (its index in
    ``degree_bins(len(noisy_hist))``) from ``noisy_hist`` (the noisy histogram over degrees 1..M).

    The draw's uniform is a hash of the whole row and ``seed``: key the persons first
    (:func:`key_persons`) so that no two rows are alike.
    """
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, StructField, StructType

    if DEGREE in persons.columns:
        raise ValueError(f"the persons already have a column {DEGREE!r}")
    hist = np.asarray(noisy_hist, dtype=np.float64)
    out = StructType([*persons.schema.fields, StructField(DEGREE, IntegerType(), False)])
    names = [*persons.columns, DEGREE]

    def draw(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            degrees = degrees_in_bins(batch.column(degree_bin_col).to_numpy(), batch.column(len(names) - 1).to_numpy(),
                                      hist)
            yield pa.RecordBatch.from_arrays([*batch.columns[:-1], pa.array(degrees, pa.int32())], names=names)

    with_uniform = persons.withColumn("__u", _uniform(persons.columns, seed, _DEGREE_STREAM))
    return with_uniform.mapInArrow(draw, out)


def _signature(signature: Sequence[str], level: int) -> Column:
    """The signature at back-off ``level`` (its last ``level`` columns dropped) as a 128-bit key: two
    ``xxhash64`` of its JSON text under two seeds (two signatures share a key with probability below
    S^2 / 2^129 for S signatures), so that joins and windows shuffle 16 bytes, not the text."""
    from pyspark.sql import functions as F

    kept = [F.col(f"`{c}`") for c in signature[:len(signature) - level]]
    text = F.to_json(F.struct(F.lit(level).alias("__level"), *kept), {"ignoreNullFields": "false"})
    return F.struct(F.xxhash64(F.lit(1), text).alias("h1"), F.xxhash64(F.lit(2), text).alias("h2"))


def _positions(df: DataFrame, group: str, weight: Column, order: Column, ties: Sequence[str],
               spread: Column | None = None) -> DataFrame:
    """``df`` with ``__pos`` (the sum of ``weight`` over the rows before it in its ``group``, rows in
    ``order``); the windows run over hash buckets per group (``spread`` of them, a column constant per group;
    default :data:`BUCKETS`), so no large group is one task."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    count = F.lit(BUCKETS) if spread is None else spread
    df = df.withColumn("__w", weight).withColumn("__h", order).withColumn("__b", F.pmod(F.col("__h"), count))
    buckets = df.groupBy(group, "__b").agg(F.sum("__w").alias("__bw"))
    before = Window.partitionBy(group).orderBy("__b").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    buckets = buckets.select(group, "__b", (F.sum("__bw").over(before) - F.col("__bw")).alias("__off"))
    inside = Window.partitionBy(group, "__b").orderBy("__h", *[f"`{c}`" for c in ties]) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = df.withColumn("__in", F.sum("__w").over(inside) - F.col("__w")).join(buckets.hint("merge"), [group, "__b"])
    return df.withColumn("__pos", F.col("__off") + F.col("__in")).drop("__w", "__h", "__b", "__bw", "__off", "__in")


def _at_levels(df: DataFrame, signature: Sequence[str], levels: Sequence[int], *keep: str) -> DataFrame:
    """``keep`` of each row of ``df`` once per back-off level, with its signature there (``__sig``) and
    the level (``__lvl``): one pass over ``df``."""
    from pyspark.sql import functions as F

    at = F.array(*[F.struct(_signature(signature, lv).alias("__sig"), F.lit(lv).alias("__lvl")) for lv in levels])
    return df.select(*[F.col(f"`{c}`") for c in keep], F.explode(at).alias("__at")) \
        .select(*[F.col(f"`{c}`") for c in keep], "__at.__sig", "__at.__lvl")


def _backoff(persons: DataFrame, pool_sigs: DataFrame, signature: Sequence[str]) -> DataFrame:
    """Per signature of the persons (``__sig0``): the finest back-off (``__sig``, level ``__lvl``) whose pool
    rows (``__pool``; ``pool_sigs``: the pool's rows ``__n`` per signature) are at least the degree of each
    of its persons; else the whole pool."""
    from pyspark.sql import functions as F

    levels = range(len(signature) + 1)
    counts = _at_levels(pool_sigs, signature, levels, "__n").groupBy("__sig", "__lvl").agg(F.sum("__n").alias("__pool"))
    mine = persons.groupBy(*[f"`{c}`" for c in signature]).agg(F.max(DEGREE).alias("__d")) \
        .withColumn("__sig0", _signature(signature, 0))
    covered = _at_levels(mine, signature, levels, "__sig0", "__d").join(counts.hint("merge"), ["__sig", "__lvl"]) \
        .where((F.col("__pool") >= F.col("__d")) | (F.col("__lvl") == len(signature)))
    return covered.groupBy("__sig0").agg(F.min(F.struct("__lvl", "__sig", "__pool")).alias("__m")) \
        .select("__sig0", *[F.col(f"__m.{c}").alias(c) for c in ("__lvl", "__sig", "__pool")])


def deal_rows(persons: DataFrame, pool: DataFrame, signature: list[str], key: str,
              seed: int) -> tuple[DataFrame, tuple[DataFrame, ...]]:
    """Each person's ``degree`` rows, dealt from ``pool`` by ``signature`` with back-off (module docstring),
    and the cached frames they read (the pool's rows per signature, the back-off choice): unpersist them
    once the rows are written.

    ``persons``: ``key``, the person columns, the derived ``_*`` columns and ``degree``; ``pool``: rows
    with every column of the output, the person columns and the derived columns. ``signature``: columns
    of both, the one kept longest first (``_mode_*``, the person columns, ``_degree``). Out: ``key``, then the pool's
    columns in its order without the derived ``_*`` ones, the person columns taken from the person.
    ``persons`` and ``pool`` are each read twice (once here for the back-off, once by the output's
    action): pass materialised frames when recomputing them is costly. The pool's rows are numbered
    within each chosen signature after one join with the signatures each pool signature serves (found
    on the pool's signature counts), so a pool row is copied only to the back-off levels that use it.
    """
    from pyspark.sql import functions as F

    person_cols = [c for c in persons.columns if c not in (key, DEGREE) and not c.startswith("_")]
    missing = sorted({*signature, *person_cols} - set(pool.columns))
    if missing or not set(signature) <= set(persons.columns) or DEGREE not in persons.columns:
        raise ValueError(f"deal_rows: the pool lacks {missing}, or the persons lack the signature or {DEGREE!r}")
    if key in pool.columns:
        raise ValueError(f"deal_rows: the pool has a column {key!r}, the name of the persons' key")
    pool_sigs = pool.groupBy(*[f"`{c}`" for c in signature]).agg(F.count(F.lit(1)).alias("__n")).persist()
    choice = _backoff(persons, pool_sigs, signature).persist()  # one row per signature: filled by the next action
    used = sorted(r["__lvl"] for r in choice.select("__lvl").distinct().collect())  # synthetic metadata: a few ints
    if not used and pool.isEmpty():
        choice.unpersist()
        pool_sigs.unpersist()
        raise ValueError("deal_rows: the pool of synthetic rows is empty; there are no rows to deal")
    placed = persons.withColumn("__sig0", _signature(signature, 0)).join(choice.hint("merge"), "__sig0")
    placed = _positions(placed, "__sig", F.col(DEGREE), _order([key], seed, _PERSON_ORDER_STREAM), [key])
    slots = placed.select(f"`{key}`", *[f"`{c}`" for c in person_cols], "__sig", "__pos", "__pool", F.explode(
        F.when(F.col(DEGREE) > 0, F.sequence(F.lit(0), F.col(DEGREE) - 1))).alias("__j"))
    slots = slots.select(f"`{key}`", *[f"`{c}`" for c in person_cols], "__sig",
                         F.pmod(F.col("__pos") + F.col("__j"), F.col("__pool")).alias("__pos"))

    # which chosen signatures each pool signature serves, from the (few) pool signatures: the rows join it once
    served = _at_levels(pool_sigs.withColumn("__sig0", _signature(signature, 0)), signature, used or [0], "__sig0")
    served = served.join(choice.select("__sig", "__pool").distinct().hint("merge"), "__sig") \
        .select("__sig0", "__sig", "__pool")
    row_cols = [c for c in pool.columns if c not in person_cols and not c.startswith("_")]
    ordered = pool.withColumn("__o", _order(pool.columns, seed, _POOL_ORDER_STREAM)) \
        .withColumn("__sig0", _signature(signature, 0))
    leveled = ordered.join(served.hint("merge"), "__sig0") \
        .select("__sig", "__o", "__pool", *[f"`{c}`" for c in row_cols])  # a pool row once per signature it serves
    spread = F.least(F.lit(BUCKETS), F.lit(1) + F.col("__pool").cast("long") / F.lit(BUCKET_ROWS)).cast("int")
    numbered = _positions(leveled, "__sig", F.lit(1), F.col("__o"), row_cols, spread)  # ties: alike in what is kept
    numbered = numbered.select("__sig", "__pos", *[f"`{c}`" for c in row_cols]).hint("merge")
    rows = slots.join(numbered, ["__sig", "__pos"])
    return rows.select(f"`{key}`", *[f"`{c}`" for c in pool.columns if not c.startswith("_")]), (choice, pool_sigs)
