"""The two tables a people run measures, built in Spark from one keyed input (docs/people.md).

- the person frame: one row per id (``groupBy(id)``, aggregated partially before its one shuffle): each
  person column, ``_degree`` (the bin of min(the id's rows, M)) and ``_mode_<col>`` (the id's most frequent
  non-null value of ``col``; ties to the smallest value); the id is dropped. The degree histogram over
  1..M is observed in the same job (``DataFrame.observe``: one count per degree, no extra pass);
- the row frame: every input row with its person's attributes (the same aggregates as window functions
  over the id: one shuffle on the id, which the bounding to K rows per id reuses), the id kept for that
  bounding (:func:`~privsyn_spark.measure.input_codes.bounded_codes` drops it after).

Each is read by the job that writes its scratch codes: two scans of the input in all, none to the driver.
A person column that is not constant for an id takes its smallest value (nulls ignored; all null stays
null); such ids are counted for the operator report only (exact, NOT private), as are the rows whose id
is null: they are no one's rows and are left out of both tables (a row unit of its own removed: no
sensitivity changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.schema.people import DEGREE, PeopleSpec, degree_bins, degree_label, mode_name

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

_ROWS = "__privsyn_person_rows"


@dataclass
class PeopleFrames:
    """The person frame and the row frame of one input (module docstring), and what their jobs observed."""

    persons: DataFrame
    rows: DataFrame
    observations: tuple[Any, ...]
    max_rows: int

    def degree_counts(self) -> np.ndarray:
        """The exact degree histogram: persons with 1..M rows (a person of more than M rows counts at M), an
        int64 array of length M. Only after a DataFrame action over :attr:`persons` (its scratch write)."""
        got = self.observations[0].get
        return np.array([int(got.get(f"d{d}") or 0) for d in range(1, self.max_rows + 1)], dtype=np.int64)

    def stats(self) -> dict[str, Any]:
        """What building the frames found (exact, NOT private: the operator report only)."""
        got = self.observations[1].get
        return {"private": False, "persons": int(got.get("persons") or 0),
                "persons_not_constant": int(got.get("not_constant") or 0),
                "persons_above_max_rows": int(got.get("above") or 0),
                "null_id_rows": int(self.observations[2].get.get("null_ids") or 0),
                "not_constant_rule": "a person column that varies within an id takes its smallest value"}


def degree_bin(rows: Column, spec: PeopleSpec) -> Column:
    """``_degree``: the label of the bin of min(``rows``, M) (:func:`~privsyn_spark.schema.people.degree_bins`)."""
    from pyspark.sql import functions as F

    capped = F.least(rows, F.lit(spec.max_rows_per_person))
    out: Any = F
    for low, high in degree_bins(spec.max_rows_per_person):
        out = out.when(capped <= high, F.lit(degree_label(low, high)))
    return out


def people_frames(raw: DataFrame, spec: PeopleSpec) -> PeopleFrames:
    """The person frame and the row frame of the keyed table ``raw`` (module docstring); lazy, no job runs."""
    from pyspark.sql import Observation, Window
    from pyspark.sql import functions as F

    key = F.col(f"`{spec.id}`")
    nulls = Observation("privsyn_people_null_ids")
    keyed = raw.observe(nulls, F.sum(F.when(key.isNull(), 1).otherwise(0)).alias("null_ids")).where(key.isNotNull())

    def attributes(window: Any) -> list[Column]:
        over = (lambda c: c.over(window)) if window is not None else (lambda c: c)
        cols = [over(F.min(F.col(f"`{c}`"))).alias(c) for c in spec.person_columns]
        cols.append(over(F.count(F.lit(1))).alias(_ROWS))
        return cols + [over(F.mode(F.col(f"`{c}`"), True)).alias(mode_name(c)) for c in spec.summaries]

    grouped = keyed.groupBy(key).agg(*attributes(None), *(
        (F.min(F.col(f"`{c}`")) != F.max(F.col(f"`{c}`")))
        | ((F.count(F.col(f"`{c}`")) > 0) & (F.count(F.col(f"`{c}`")) < F.count(F.lit(1)))) for c in
        spec.person_columns)).toDF(spec.id, *spec.person_columns, _ROWS, *(mode_name(c) for c in spec.summaries),
                                   *(f"__privsyn_varies_{j}" for j in range(len(spec.person_columns))))
    varies = F.lit(False)
    for j in range(len(spec.person_columns)):
        varies = varies | F.col(f"__privsyn_varies_{j}")
    degrees, tallies = Observation("privsyn_people_degrees"), Observation("privsyn_people_tallies")
    capped = F.least(F.col(_ROWS), F.lit(spec.max_rows_per_person))
    observed = grouped.observe(degrees, *(F.sum(F.when(capped == d, 1).otherwise(0)).alias(f"d{d}")
                                          for d in range(1, spec.max_rows_per_person + 1)))
    observed = observed.observe(tallies, F.count(F.lit(1)).alias("persons"),
                                F.sum(F.when(varies, 1).otherwise(0)).alias("not_constant"),
                                F.sum(F.when(F.col(_ROWS) > spec.max_rows_per_person, 1).otherwise(0)).alias("above"))
    person_attrs = [*spec.person_columns, DEGREE, *(mode_name(c) for c in spec.summaries)]
    persons = observed.withColumn(DEGREE, degree_bin(F.col(_ROWS), spec)).select(*(F.col(f"`{c}`")
                                                                                   for c in person_attrs))
    window = Window.partitionBy(key)
    own = [c for c in raw.columns if c not in spec.person_columns]
    rows = keyed.select(*(F.col(f"`{c}`") for c in own), *attributes(window))
    rows = rows.withColumn(DEGREE, degree_bin(F.col(_ROWS), spec)).drop(_ROWS)
    return PeopleFrames(persons, rows, (degrees, tallies, nulls), spec.max_rows_per_person)
