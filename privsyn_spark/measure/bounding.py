"""Contribution bounding in Spark: each privacy id keeps at most K of its rows, uniformly at random.

Before anything is counted (``measure/input_codes``), every row gets a key: a keyed pseudo-random
permutation (:func:`row_key`) of its ``monotonically_increasing_id``, with round keys derived from a
seed drawn from ``os.urandom`` per bounding and never logged or stored. The keys are distinct (a
permutation of distinct indices), so an id's rows are in a uniformly random order with no ties, and an
id keeps its K rows of smallest key: a uniform sample of its rows that depends on that id's rows alone
(the stability ``privacy/unit.py`` needs). It takes one shuffle on the id, in the job that consumes
the rows (the scratch write):

- K = 1: one aggregate, per id the ``min_by`` of every column by the key. Spark aggregates it
  partially before the shuffle (a hash aggregate on fixed-width columns such as the packed words), so
  the shuffle moves one row per id and input partition, like a ``groupBy(id).count()``;
- K > 1: one window over each id's rows ordered by key, giving each row its ``row_number`` and the
  id's row count; rows numbered above K are dropped. The count (over the whole id) gives the report's
  truncated ids, and it also keeps Spark from adding a partial ``WindowGroupLimit`` before the shuffle
  (Spark adds one for a filter on ``row_number`` alone). That limit sorts every input partition, and it
  cost more than it saved: at 1.9·10^7 rows, K = 5 to 50, 9.0-10.2 s with it, 6.4-8.2 s without
  (docs/privacy-unit.md).

A threshold design (per id the K-th smallest key from a partial aggregate, broadcast, a narrow filter)
would need the key to be the same in two passes over the source; ``rand`` and
``monotonically_increasing_id`` are only that when the scan is, so it is not used (docs/privacy-unit.md).

A row whose id is null (any id column null) is its own unit: its key joins the group key, so it is a
group of its own (and null ids never pile up in one task). No data-dependent refusal. What bounding did
(rows and ids affected, null-id rows) is observed during the same job (``DataFrame.observe``, no extra
pass) for the operator report only: it is exact and NOT private. The id columns never go further than
this function's output, which only the encoder reads (it keeps the schema's columns).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

_RANK, _KEY, _NULL = "__privsyn_rank", "__privsyn_key", "__privsyn_null_id"
_GROUP, _COUNT = "__privsyn_group", "__privsyn_rows"
_ROUNDS, _LOW = 4, 0xFFFFFFFF
DROPPED_WARNING_SHARE = 0.10
"""Share of dropped rows above which the report warns that bounding biases the table."""


def check_id_columns(unit: PrivacyUnit, columns: list[str], schema_names: tuple[str, ...]) -> None:
    """``UsageError`` when an id column is missing from the table or is a column the schema synthesizes."""
    missing = [c for c in unit.id_columns if c not in columns]
    if missing:
        raise UsageError(f"privacy id column(s) {missing} not in the input table")
    kept = [c for c in unit.id_columns if c in schema_names]
    if kept:
        raise UsageError(f"privacy id column(s) {kept} are declared as synthesized columns in the schema; "
                         f"declare them type: drop (an id is never synthesized)")


@dataclass
class Bounded:
    """The bounded table and, once an action ran over it, what bounding did (:meth:`stats`)."""

    df: DataFrame
    unit: PrivacyUnit
    observations: tuple[Any, ...] = ()

    def stats(self) -> dict[str, Any] | None:
        """Exact tallies of the bounding (operators only, NOT private); None for a row unit. Call it only
        after a DataFrame action (a write, a collect; not an RDD pass) over :attr:`df`: Spark's
        ``Observation.get`` waits for one."""
        if not self.observations:
            return None
        got: dict[str, Any] = {}
        for observation in self.observations:
            got.update(observation.get)
        rows, kept = int(got.get("rows") or 0), int(got.get("kept") or 0)
        ids, over = int(got.get("ids") or 0), int(got.get("ids_over") or 0)
        dropped = rows - kept
        out: dict[str, Any] = {"private": False, "max_rows_per_id": self.unit.bound, "rows": rows, "rows_kept": kept,
               "rows_dropped": dropped, "rows_dropped_share": dropped / rows if rows else 0.0, "ids": ids,
               "ids_truncated": over, "ids_truncated_share": over / ids if ids else 0.0,
               "null_id_rows": int(got.get("null_ids") or 0)}
        if out["rows_dropped_share"] > DROPPED_WARNING_SHARE:
            out["warning"] = (f"bounding to {self.unit.bound} rows per id dropped {out['rows_dropped_share']:.1%} "
                              f"of the rows (more than {DROPPED_WARNING_SHARE:.0%}): the synthetic table "
                              "under-represents people with many rows; consider a larger max_rows_per_id")
        return out


def bound_contributions(df: DataFrame, unit: PrivacyUnit, seed: int | None = None) -> Bounded:
    """At most ``unit.bound`` uniformly random rows per id of ``df`` (module docstring); one shuffle, no
    collect. The id columns are still in the result (the encoder drops them). ``seed``: tests only."""
    if unit.is_row:
        return Bounded(df, unit)
    from pyspark.sql import functions as F

    check_id_columns(unit, list(df.columns), ())
    seed = int.from_bytes(os.urandom(8), "big") >> 1 if seed is None else int(seed)
    null_id = F.lit(False)
    for c in unit.id_columns:
        null_id = null_id | F.col(f"`{c}`").isNull()
    keyed = df.withColumn(_KEY, F.monotonically_increasing_id()).withColumn(_KEY, row_key(F.col(_KEY), seed))
    keyed = keyed.withColumn(_NULL, null_id)
    if unit.bound == 1:
        bounded, observations = _one_per_id(keyed, list(df.columns), unit)
    else:
        bounded, observations = _ranked(keyed, list(df.columns), unit)
    return Bounded(bounded, unit, observations)


def row_key(index: Column, seed: int) -> Column:
    """A keyed pseudo-random permutation of the 64-bit row index (unique in, unique out): a 4-round Feistel
    network over its 32-bit halves with ``xxhash64`` of a secret round key as the round function (Luby and
    Rackoff 1988). Unique keys: ordering an id's rows by them is a (pseudo-)uniform random order with no
    ties. Bit operations only (no overflow under ANSI mode)."""
    from pyspark.sql import functions as F

    digest = hashlib.blake2b(seed.to_bytes(16, "big", signed=True), digest_size=4 * _ROUNDS).digest()
    low = F.lit(_LOW)
    left, right = F.shiftrightunsigned(index, 32), index.bitwiseAND(low)
    for r in range(_ROUNDS):
        round_key = int.from_bytes(digest[4 * r:4 * r + 4], "big")
        left, right = right, left.bitwiseXOR(F.xxhash64(F.lit(round_key), right).bitwiseAND(low))
    return F.shiftleft(left, 32).bitwiseOR(right)


def _groups(unit: PrivacyUnit) -> list[Column]:
    """The id columns and, for a row with a null id, its own key (each such row is a group of its own)."""
    from pyspark.sql import functions as F

    return [*(F.col(f"`{c}`") for c in unit.id_columns), F.when(F.col(_NULL), F.col(_KEY)).alias(_GROUP)]


def _one_per_id(keyed: DataFrame, columns: list[str], unit: PrivacyUnit) -> tuple[DataFrame, tuple[Any, ...]]:
    """K = 1: per id, the row of the smallest key, as one aggregate (``min_by`` of every column by the
    unique key: all from one row). Spark aggregates it partially before the shuffle (a hash aggregate when
    the columns are fixed-width, like the packed words), so the shuffle moves about one row per id and
    input partition instead of every row."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation("privsyn_bounding")
    values = [c for c in columns if c not in unit.id_columns]
    agg = keyed.groupBy(*_groups(unit)).agg(F.count(F.lit(1)).alias(_COUNT),
                                            F.max(F.col(_NULL)).alias(_NULL),
                                            *(F.min_by(F.col(f"`{c}`"), F.col(_KEY)).alias(c) for c in values))
    agg = agg.observe(observation, F.sum(_COUNT).alias("rows"), F.count(F.lit(1)).alias("kept"),
                      F.count(F.lit(1)).alias("ids"),
                      F.sum(F.when(F.col(_COUNT) > 1, 1).otherwise(0)).alias("ids_over"),
                      F.sum(F.when(F.col(_NULL), 1).otherwise(0)).alias("null_ids"))
    return agg.select(*(F.col(f"`{c}`") for c in columns)), (observation,)


def _ranked(keyed: DataFrame, columns: list[str], unit: PrivacyUnit) -> tuple[DataFrame, tuple[Any, ...]]:
    """K > 1: rows hash-partitioned by the id (one shuffle) and sorted by key within it; one window numbers
    each id's rows and counts them, rows numbered above K dropped. The tallies are observed on the kept
    rows: an id's count sits on each of them (``rows``: the counts of the rows numbered 1)."""
    from pyspark.sql import Observation, Window
    from pyspark.sql import functions as F

    k = unit.bound
    observation = Observation("privsyn_bounding")
    ordered = Window.partitionBy(*_groups(unit)).orderBy(_KEY)
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    first = F.col(_RANK) == 1
    # the count (read by the observation) also keeps Spark from adding a partial WindowGroupLimit
    ranked = keyed.select("*", F.row_number().over(ordered).alias(_RANK), F.count(F.lit(1)).over(whole).alias(_COUNT))
    kept = ranked.where(F.col(_RANK) <= k).observe(
        observation, F.sum(F.when(first, F.col(_COUNT)).otherwise(0)).alias("rows"), F.count(F.lit(1)).alias("kept"),
        F.sum(F.when(first, 1).otherwise(0)).alias("ids"),
        F.sum(F.when(first & (F.col(_COUNT) > k), 1).otherwise(0)).alias("ids_over"),
        F.sum(F.when(F.col(_NULL), 1).otherwise(0)).alias("null_ids"))
    return kept.select(*(F.col(f"`{c}`") for c in columns)), (observation,)
