"""Fidelity of synthetic people: rows per person, person attributes, per-person behaviour and a workload
of join-aggregate queries, real against synthetic, both in the flat keyed form (docs/people.md).

Each table is first reduced in Spark to one row per key (:func:`person_table`: the person columns, the
person's rows, total amount, distinct values of one row column, whether all its rows share one value
of another); one grouping-sets aggregation of that table answers the histograms, the person
attributes' marginals and the whole workload, and the value distances of the totals run on it
(``value_metrics``). Only aggregates reach the driver. Like every metric here, these read the
private table and are not differentially private.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.evaluate.fidelity import tvd
from privsyn_spark.evaluate.value_metrics import ks_distance, wasserstein_distance

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

MEASURES = ("rows", "amount_sum", "amount_avg", "people", "rows_per_person")
"""The workload's aggregates per group: count of rows, sum and average of the amount, number of people,
rows per person."""


@dataclass(frozen=True)
class PeopleColumns:
    """Which columns of a keyed table the people metrics read."""

    key: str
    person: tuple[str, ...]  # constant per key
    row: tuple[str, ...]  # categorical row columns of the person x row marginals
    amount: str  # numeric row column: per-person totals, the workload's sums and averages
    one_value: str  # row column of the share of people whose rows all share one value
    distinct: str  # row column whose distinct values per person are counted
    max_rows: int  # M: a person with more rows is counted at M in the rows-per-person histogram


def person_table(rows: DataFrame, cols: PeopleColumns) -> DataFrame:
    """One row per key: the person columns (their smallest value, if not constant), ``_rows`` (capped at
    M), ``_all_rows``, ``_total`` (the amount's sum), ``_distinct`` and ``_one`` (1 if every row shares one
    value of ``one_value``)."""
    from pyspark.sql import functions as F

    return rows.groupBy(cols.key).agg(
        *[F.min(c).alias(c) for c in cols.person], F.count(F.lit(1)).alias("_all_rows"),
        F.sum(cols.amount).alias("_total"), F.countDistinct(cols.distinct).alias("_distinct"),
        (F.countDistinct(cols.one_value) <= 1).cast("int").alias("_one"),
    ).withColumn("_rows", F.least(F.col("_all_rows"), F.lit(cols.max_rows)))


def workload(cols: PeopleColumns) -> list[tuple[tuple[str, ...], str]]:
    """The join-aggregate queries: each measure of :data:`MEASURES` grouped by each person column and each
    pair of them (TPC-H style: a row aggregate by attributes of the parent)."""
    groupings = [(c,) for c in cols.person] + list(combinations(cols.person, 2))
    return [(g, m) for g in groupings for m in MEASURES]


def _grouped(persons: DataFrame, cols: PeopleColumns) -> dict[tuple[str, ...], Any]:
    """The person table's groups (people, rows, amount) by degree, distinct values, one value, each person
    column and each pair."""
    from pyspark.sql import functions as F

    sets: list[tuple[str, ...]] = [("_rows",), ("_distinct",), ("_one",)]
    sets += [(c,) for c in cols.person] + list(combinations(cols.person, 2))
    return _by_sets(persons, sets, {"people": F.count(F.lit(1)), "rows": F.sum("_all_rows"),
                                    "amount_sum": F.sum("_total")})


def _by_sets(df: DataFrame, sets: Sequence[tuple[str, ...]], aggregates: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Per grouping set, a pandas frame of its groups with the named ``aggregates``: one Spark aggregation
    (``GROUPING SETS``; ``grouping_id`` has a 1 bit for each column a set leaves out, the first column
    the highest)."""
    from pyspark.sql import functions as F

    names = list(dict.fromkeys(c for s in sets for c in s))
    out: Any = df.groupingSets([list(s) for s in sets], *names).agg(
        *[agg.alias(name) for name, agg in aggregates.items()], F.grouping_id().alias("_gid")).toPandas()
    found = {}
    for s in sets:
        gid = sum(1 << (len(names) - 1 - i) for i, c in enumerate(names) if c not in s)
        found[s] = out.loc[out["_gid"] == gid, [*s, *aggregates]].reset_index(drop=True)
    return found


def _marginal_tvd(real: Any, synthetic: Any, columns: list[str], count: str = "people") -> float:
    """TVD of the ``count`` column over the groups of ``columns`` (a group absent from one side counts 0)."""
    both = real.merge(synthetic, on=columns, how="outer", suffixes=("_r", "_s")).fillna(0)
    return tvd(both[f"{count}_r"].to_numpy(), both[f"{count}_s"].to_numpy())


def _relative_error(real: Any, synthetic: Any, columns: list[str], measure: str) -> float:
    """A query's error: sum over its groups of |synthetic - real| / sum of |real| (groups absent from one
    side answer 0)."""
    both = real.merge(synthetic, on=columns, how="outer", suffixes=("_r", "_s")).fillna(0)
    answers = []
    for side in ("_r", "_s"):
        rows, people, amount = (both[f"{m}{side}"].to_numpy(float) for m in ("rows", "people", "amount_sum"))
        with np.errstate(divide="ignore", invalid="ignore"):
            by = {"rows": rows, "amount_sum": amount, "people": people,
                  "amount_avg": np.where(rows > 0, amount / rows, 0.0),
                  "rows_per_person": np.where(people > 0, rows / people, 0.0)}
        answers.append(by[measure])
    scale = np.abs(answers[0]).sum()
    return float(np.abs(answers[1] - answers[0]).sum() / scale) if scale else float("nan")


def person_row_tvd(real: DataFrame, synthetic: DataFrame, cols: PeopleColumns) -> float:
    """Mean TVD of the person x row 2-way marginals over the rows (every person column with every row
    column), from one grouping-sets aggregation per table."""
    from pyspark.sql import functions as F

    pairs = [(p, r) for p in cols.person for r in cols.row]
    real_counts, synth_counts = (_by_sets(df, pairs, {"rows": F.count(F.lit(1))}) for df in (real, synthetic))
    return float(np.mean([_marginal_tvd(real_counts[p], synth_counts[p], list(p), "rows") for p in pairs]))


def people_metrics(real: DataFrame, synthetic: DataFrame, cols: PeopleColumns) -> dict[str, float]:
    """Every people metric of the synthetic keyed table against the real one (module docstring); the
    workload's errors as mean, median and max over its queries."""
    real_people, synth_people = person_table(real, cols).persist(), person_table(synthetic, cols).persist()
    try:
        grouped = [_grouped(real_people, cols), _grouped(synth_people, cols)]

        def by(*sets: tuple[str, ...]) -> float:
            return float(np.mean([_marginal_tvd(grouped[0][s], grouped[1][s], list(s)) for s in sets]))

        shares = [float((g[("_one",)]["people"] * g[("_one",)]["_one"]).sum() / g[("_one",)]["people"].sum())
                  for g in grouped]
        errors = [_relative_error(grouped[0][g], grouped[1][g], list(g), m) for g, m in workload(cols)]
        real_totals, synth_totals = (p.select(p["_total"].cast("double").alias("x"))
                                     for p in (real_people, synth_people))
        return {
            "rows_per_person_tvd": by(("_rows",)),
            "person_tvd_1way": by(*[(c,) for c in cols.person]),
            "person_tvd_2way": by(*combinations(cols.person, 2)),
            "person_row_tvd_2way": person_row_tvd(real, synthetic, cols),
            "total_amount_ks": ks_distance(real_totals, synth_totals),
            "total_amount_wasserstein": wasserstein_distance(real_totals, synth_totals),
            "distinct_per_person_tvd": by(("_distinct",)),
            "one_value_share_real": shares[0],
            "one_value_share_synthetic": shares[1],
            "workload_queries": float(len(errors)),
            "workload_error_mean": float(np.nanmean(errors)),
            "workload_error_median": float(np.nanmedian(errors)),
            "workload_error_max": float(np.nanmax(errors)),
        }
    finally:
        real_people.unpersist()
        synth_people.unpersist()
