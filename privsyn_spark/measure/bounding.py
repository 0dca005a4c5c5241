"""Contribution bounding in Spark: each privacy id keeps at most K of its rows, uniformly at random.

Before anything is counted (``measure/input_codes``), every row gets a random 64-bit key drawn on the
executors (:func:`row_keys`): a non-deterministic vectorised UDF fills each Arrow batch from
``os.urandom``. No key, seed or secret exists on the driver, so none is in the query plan, Spark's UI,
its event log or the history server: knowing every plan of a run does not tell which rows an id kept.
An id keeps its K rows of smallest key: the keys are independent and uniform, so the kept rows are a
uniform sample of the id's rows that depends on that id's rows alone (the stability
``privacy/unit.py`` needs). Two rows of one id tie with probability below m^2 / 2^65 for an id of m
rows (3·10^-6 at m = 10^7); a tie changes neither the bound (``row_number`` still numbers K rows,
``min_by`` still returns one value per column of that id's rows) nor anything beyond which of the two
tied rows is kept. It takes one shuffle on the id, in the job that consumes the rows (the scratch write):

- K = 1: one aggregate, per id the ``min_by`` of every column by the key. Spark aggregates it
  partially before the shuffle (a hash aggregate on fixed-width columns such as the packed words), so
  the shuffle moves one row per id and input partition, like a ``groupBy(id).count()``;
- K > 1: one window over each id's rows ordered by key, giving each row its ``row_number`` and the
  id's row count; rows numbered above K are dropped. The count (over the whole id) gives the report's
  truncated ids, and it also keeps Spark from adding a partial ``WindowGroupLimit`` before the shuffle
  (Spark adds one for a filter on ``row_number`` alone). That limit sorts every input partition, and it
  cost more than it saved (docs/privacy-unit.md).

A threshold design (per id the K-th smallest key from a partial aggregate, broadcast, a narrow filter)
would need the key to be the same in two passes over the source; random keys are not, so it is not
used (docs/privacy-unit.md).

A row whose id is null (any id column null) is its own unit and is never bounded: its key joins the
group key, so it is a group of its own (and null ids never pile up in one task). The unit's
``null_ids: drop`` removes such rows instead (each removed row is a unit of its own: no sensitivity
changes). No data-dependent refusal. What bounding did (rows and ids affected, null-id rows) is
observed during the same job (``DataFrame.observe``, no extra pass) for the operator report only: it
is exact and NOT private, so its warnings go to that report; the log says only where they are. The id
columns never go further than this function's output, which only the encoder reads (it keeps the
schema's columns).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

_RANK, _KEY, _NULL = "__privsyn_rank", "__privsyn_key", "__privsyn_null_id"
_GROUP, _COUNT = "__privsyn_group", "__privsyn_rows"
_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # splitmix64's constants (tests' keys)
DROPPED_WARNING_SHARE = 0.10
"""Share of dropped rows above which the report warns that bounding biases the table."""
NULL_ID_WARNING_SHARE = 0.01
"""Share of null-id rows (each its own unit, never bounded) above which the report warns."""


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
        removed = int(got.get("null_removed") or 0)  # null_ids: drop: null-id rows removed before bounding
        rows, kept = int(got.get("rows") or 0) + removed, int(got.get("kept") or 0)
        ids, over = int(got.get("ids") or 0), int(got.get("ids_over") or 0)
        nulls, dropped = int(got.get("null_ids") or 0) + removed, rows - kept
        out: dict[str, Any] = {"private": False, "max_rows_per_id": self.unit.bound, "rows": rows, "rows_kept": kept,
               "rows_dropped": dropped, "rows_dropped_share": dropped / rows if rows else 0.0, "ids": ids,
               "ids_truncated": over, "ids_truncated_share": over / ids if ids else 0.0,
               "null_id_rows": nulls, "null_id_rows_share": nulls / rows if rows else 0.0,
               "null_ids": self.unit.null_ids}
        warnings = []
        if out["rows_dropped_share"] > DROPPED_WARNING_SHARE:
            warnings.append(f"bounding to {self.unit.bound} rows per id dropped {out['rows_dropped_share']:.1%} "
                            f"of the rows (more than {DROPPED_WARNING_SHARE:.0%}): the synthetic table "
                            "under-represents people with many rows; consider a larger max_rows_per_id")
        if out["null_id_rows_share"] > NULL_ID_WARNING_SHARE:
            warnings.append(f"{out['null_id_rows_share']:.1%} of the rows have a null privacy id (more than "
                            f"{NULL_ID_WARNING_SHARE:.0%}): " + (
                                "they were dropped (privacy_unit null_ids: drop)" if self.unit.null_ids == "drop"
                                else "each is a unit of its own and never bounded, so a person whose id is "
                                "missing on several rows is protected per row, not as a person; fix the ids "
                                "or declare privacy_unit null_ids: drop"))
        if warnings:
            out["warning"] = "; ".join(warnings)
        log.info("contribution bounding: its tallies and warnings (null-id rows, rows dropped; exact, NOT private) "
                 "are in the operator report's privacy_unit section")
        return out


def bound_contributions(df: DataFrame, unit: PrivacyUnit, seed: int | None = None) -> Bounded:
    """At most ``unit.bound`` uniformly random rows per id of ``df`` (module docstring); one shuffle, no
    collect. The id columns are still in the result (the encoder drops them). ``seed``: tests only."""
    if unit.is_row:
        return Bounded(df, unit)
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    check_id_columns(unit, list(df.columns), ())
    columns = list(df.columns)
    null_id = F.lit(False)
    for c in unit.id_columns:
        null_id = null_id | F.col(f"`{c}`").isNull()
    observations: tuple[Any, ...] = ()
    if unit.null_ids == "drop":
        removed = Observation("privsyn_null_ids")
        df = df.observe(removed, F.sum(F.when(null_id, 1).otherwise(0)).alias("null_removed")).where(~null_id)
        observations = (removed,)
    keyed = df.withColumn(_KEY, row_keys(F.monotonically_increasing_id(), seed)).withColumn(_NULL, null_id)
    if unit.bound == 1:
        bounded, observed = _one_per_id(keyed, columns, unit)
    else:
        bounded, observed = _ranked(keyed, columns, unit)
    return Bounded(bounded, unit, observations + observed)


def row_keys(index: Column, seed: int | None = None) -> Column:
    """Per row a random 64-bit key drawn on the executors (module docstring): a non-deterministic pandas UDF
    that fills each batch from ``os.urandom``, so no key or seed is in the plan. ``seed`` (tests only):
    instead a fixed bijection of ``index`` (splitmix64's finaliser of ``index + seed``), so a row keeps its
    key across runs over the same layout, and distinct indices never tie."""
    import pandas
    from pyspark.sql.functions import pandas_udf

    def row_key(index: pd.Series) -> pd.Series:
        return _keys(index, seed)

    row_key.__annotations__ = {"index": pandas.Series, "return": pandas.Series}  # resolved: pandas loads lazily
    return pandas_udf(row_key, "long").asNondeterministic()(index)  # type: ignore[call-overload]


def _keys(index: pd.Series, seed: int | None) -> pd.Series:
    """The keys of one batch (:func:`row_keys`)."""
    if seed is None:
        keys = np.frombuffer(os.urandom(8 * len(index)), dtype="<i8")
    else:
        z = index.to_numpy(dtype=np.int64).view(np.uint64) + np.uint64((seed * _MIX[0]) % 2 ** 64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX[1])
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX[2])
        keys = (z ^ (z >> np.uint64(31))).view(np.int64)
    import pandas

    return pandas.Series(keys, index=index.index)


def _groups(unit: PrivacyUnit) -> list[Column]:
    """The id columns and, for a row with a null id, its own key (each such row is a group of its own)."""
    from pyspark.sql import functions as F

    return [*(F.col(f"`{c}`") for c in unit.id_columns), F.when(F.col(_NULL), F.col(_KEY)).alias(_GROUP)]


def _one_per_id(keyed: DataFrame, columns: list[str], unit: PrivacyUnit) -> tuple[DataFrame, tuple[Any, ...]]:
    """K = 1: per id, the row of the smallest key, as one aggregate (``min_by`` of every column by the
    key: all from one row unless two keys tie, module docstring). Spark aggregates it partially before
    the shuffle (a hash aggregate when the columns are fixed-width, like the packed words), so the
    shuffle moves about one row per id and input partition instead of every row."""
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
