"""The two tables a people run measures, built in Spark from one keyed input (docs/people.md).

The input is scanned once: its rows with an id are persisted (the first job fills the cache), and both
tables are built from them:

- the person frame: one row per id, its person's attributes aggregated over the id (partial aggregation
  before the shuffle), persisted too: each person column, ``_degree`` (the bin of min(the id's rows, M))
  and ``_mode_<col>`` (the id's most frequent non-null value of ``col``, of a numerical column the label
  of its most frequent bin, values clipped to the edge bins as the encoder does and NaN left out like
  null; ties to the smallest); the id is dropped. The degree histogram over 1..M is observed in the job
  that writes it (``DataFrame.observe``: one count per degree, no extra pass);
- the row frame: every row joined on the id with its person's attributes (one shuffle of the rows on the
  id), the id kept for the bounding to K rows per id
  (:func:`~privsyn_spark.measure.input_codes.bounded_codes`, which reuses the join's partitioning on the
  id and drops the id after).

:meth:`PeopleFrames.release` unpersists both cached frames once both tables are written. None of it
reaches the driver.

The parent-child form (a parent table, one row per id, and a child table with a foreign key) is first
stacked into one keyed table (:func:`linked_table`: each row marked parent or child) and read by the same
code: a person is an id with a parent row, its degree the number of its child rows (0 for a parent with
none; the degree histogram then covers 0..M). The parent rows of one id are one person: a person column
that varies among them takes its smallest value, and such ids are counted as duplicates. Child rows whose
key is null or names no parent (orphans) and parents whose id is null are left out, counted for the
operator report only (exact, NOT private).
A person column that is not constant for an id takes its smallest value (nulls ignored; all null stays
null); such ids are counted for the operator report only (exact, NOT private), as are the rows whose id
is null: they are no one's rows and are left out of both tables (a row unit of its own removed: no
sensitivity changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.measure.encode import bin_index, numeric_value
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.people import DEGREE, PeopleSpec, bin_labels, degree_label, mode_name

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from privsyn_spark.schema.schema import Schema

_ROWS, _PARENTS = "__privsyn_person_rows", "__privsyn_person_parents"
_PARENT, _CHILD = "__privsyn_parent_row", "__privsyn_child_row"


@dataclass
class PeopleFrames:
    """The person frame and the row frame of one input (module docstring), and what their jobs observed."""

    persons: DataFrame
    rows: DataFrame
    observations: tuple[Any, ...]
    spec: PeopleSpec
    cached: tuple[DataFrame, ...]
    """The persisted frames both read: the input's rows with an id, and one row per id of its attributes."""

    def release(self) -> None:
        """Unpersist the frames both tables read: once both are written (their scratch codes)."""
        for frame in self.cached:
            frame.unpersist()

    def degree_counts(self) -> np.ndarray:
        """The exact degree histogram: persons with 1..M rows (0..M in the parent-child form; a person of more
        than M rows counts at M), an int64 array. Only after a DataFrame action over :attr:`persons` (its
        scratch write)."""
        got = self.observations[0].get
        degrees = range(self.spec.lowest_degree, self.spec.max_rows_per_person + 1)
        return np.array([int(got.get(f"d{d}") or 0) for d in degrees], dtype=np.int64)

    def stats(self) -> dict[str, Any]:
        """What building the frames found (exact, NOT private: the operator report only)."""
        got, nulls = self.observations[1].get, self.observations[2].get
        out = {"private": False, "persons": int(got.get("persons") or 0),
               "persons_above_max_rows": int(got.get("above") or 0),
               "null_id_rows": int(nulls.get("null_ids") or 0)}
        if not self.spec.parent_child:
            return {**out, "persons_not_constant": int(got.get("not_constant") or 0),
                    "not_constant_rule": "a person column that varies within an id takes its smallest value"}
        return {**out, "duplicate_parent_ids": int(got.get("not_constant") or 0),
                "null_id_parents": int(nulls.get("null_id_parents") or 0),
                "orphan_rows": int(self.observations[3].get.get("rows") or 0),
                "duplicates_rule": "the parent rows of one id are one person; a person column that varies "
                                   "among them takes its smallest value",
                "left_out_rule": "child rows whose key is null or names no parent, and parents whose id is null, "
                                 "are no one's and are left out"}


def degree_bin(rows: Column, spec: PeopleSpec) -> Column:
    """``_degree``: the label of the bin of min(``rows``, M) (:attr:`~privsyn_spark.schema.people.PeopleSpec.bins`)."""
    from pyspark.sql import functions as F

    capped = F.least(rows, F.lit(spec.max_rows_per_person))
    out: Any = F
    for low, high in spec.bins:
        out = out.when(capped <= high, F.lit(degree_label(low, high)))
    return out


def linked_table(parents: DataFrame, child: DataFrame, spec: PeopleSpec) -> DataFrame:
    """The parent-child form as one keyed table for :func:`people_frames` (lazy, no job runs): the parent
    rows (the id, the person columns) and the child rows (the foreign key as the id, the other child columns),
    stacked, each marked by its side; the key takes the parent id's type."""
    from pyspark.sql import functions as F

    assert spec.foreign_key is not None
    key_type = parents.schema[spec.id].dataType
    side = parents.select(F.col(f"`{spec.id}`"), *(F.col(f"`{c}`") for c in spec.person_columns),
                          F.lit(1).alias(_PARENT))
    rows = child.select(F.col(f"`{spec.foreign_key}`").cast(key_type).alias(spec.id),
                        *(F.col(f"`{c}`") for c in child.columns if c not in (spec.foreign_key, spec.id)),
                        F.lit(1).alias(_CHILD))
    return side.unionByName(rows, allowMissingColumns=True)


def _modal(raw: DataFrame, schema: Schema, column: str) -> Column:
    """A summary's ``_mode_<col>``: the most frequent value, or a numerical column's most frequent bin as its
    label (null and NaN left out; ties to the smallest value, or bin)."""
    from pyspark.sql import functions as F

    declared = schema.column(column)
    if not isinstance(declared, NumericalColumn):
        return F.mode(F.col(f"`{column}`"), True)
    x = numeric_value(F.col(f"`{column}`"), declared, dict(raw.dtypes)[column])
    modal = F.mode(F.when(x.isNotNull() & ~F.isnan(x), bin_index(x, declared)), True)
    return F.element_at(F.array(*(F.lit(v) for v in bin_labels(declared))), modal + 1)


def people_frames(raw: DataFrame, schema: Schema) -> PeopleFrames:
    """The person frame and the row frame of the keyed table ``raw`` read by ``schema`` and its people section
    (module docstring; in the parent-child form ``raw`` is :func:`linked_table`'s); lazy, no job runs."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spec = schema.people
    assert spec is not None
    key, linked = F.col(f"`{spec.id}`"), spec.parent_child
    nulls = Observation("privsyn_people_null_ids")
    side = (lambda marker: F.col(marker).isNotNull()) if linked else (lambda marker: F.lit(True))
    keyed = raw.observe(nulls, *(F.sum(F.when(key.isNull() & side(m), 1).otherwise(0)).alias(n) for n, m in (
        ("null_ids", _CHILD), ("null_id_parents", _PARENT))[:1 + linked])).where(key.isNotNull()).persist()
    parents = F.count(F.col(_PARENT))
    extra = [_PARENTS] * linked
    attributes = [*(F.min(F.col(f"`{c}`")).alias(c) for c in spec.person_columns),
                  (F.count(F.col(_CHILD)) if linked else F.count(F.lit(1))).alias(_ROWS),
                  *[parents.alias(_PARENTS)] * linked,
                  *(_modal(raw, schema, c).alias(mode_name(c)) for c in spec.summaries)]
    varies = [parents > 1] if linked else [  # a duplicate parent id; a person column that is not constant
        (F.min(F.col(f"`{c}`")) != F.max(F.col(f"`{c}`")))
        | ((F.count(F.col(f"`{c}`")) > 0) & (F.count(F.col(f"`{c}`")) < F.count(F.lit(1))))
        for c in spec.person_columns]
    flags = [f"__privsyn_varies_{j}" for j in range(len(varies))]
    grouped = keyed.groupBy(key).agg(*attributes, *(v.alias(n) for v, n in zip(varies, flags))).persist()
    varying = F.lit(False)
    for flag in flags:
        varying = varying | F.col(flag)
    orphans = Observation("privsyn_people_orphans")
    persons = grouped
    if linked:  # a child key that names no parent: no one's rows
        persons = persons.observe(orphans, F.sum(F.when(F.col(_PARENTS) == 0, F.col(_ROWS)).otherwise(0))
                                  .alias("rows")).where(F.col(_PARENTS) > 0)
    degrees, tallies = Observation("privsyn_people_degrees"), Observation("privsyn_people_tallies")
    capped = F.least(F.col(_ROWS), F.lit(spec.max_rows_per_person))
    observed = persons.observe(degrees, *(F.sum(F.when(capped == d, 1).otherwise(0)).alias(f"d{d}")
                                          for d in range(spec.lowest_degree, spec.max_rows_per_person + 1)))
    observed = observed.observe(tallies, F.count(F.lit(1)).alias("persons"),
                                F.sum(F.when(varying, 1).otherwise(0)).alias("not_constant"),
                                F.sum(F.when(F.col(_ROWS) > spec.max_rows_per_person, 1).otherwise(0)).alias("above"))
    person_attrs = [*spec.person_columns, DEGREE, *(mode_name(c) for c in spec.summaries)]
    persons = observed.withColumn(DEGREE, degree_bin(F.col(_ROWS), spec)).select(*(F.col(f"`{c}`")
                                                                                   for c in person_attrs))
    own = [c for c in raw.columns if c not in (*spec.person_columns, _PARENT, _CHILD)]
    rows = keyed.where(F.col(_CHILD).isNotNull()) if linked else keyed  # the child's rows
    person_side = grouped.where(F.col(_PARENTS) > 0) if linked else grouped  # an orphan's rows: no one's
    rows = rows.select(*(F.col(f"`{c}`") for c in own)).join(person_side.drop(*flags).hint("merge"), spec.id)
    rows = rows.withColumn(DEGREE, degree_bin(F.col(_ROWS), spec)).drop(_ROWS, *extra)
    return PeopleFrames(persons, rows, (degrees, tallies, nulls, orphans), spec, (keyed, grouped))
