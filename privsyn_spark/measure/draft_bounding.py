"""A private draft's table bounded to K rows per id, once (``infer-schema --epsilon`` with a privacy id).

K is proposed privately unless given (``privacy.bound_choice``, ``BOUND_SHARE`` of the draft's rho),
then the rows are bounded (:mod:`~privsyn_spark.measure.bounding`) and materialised on the executors
(``persist`` and one ``noop`` write): every count the draft makes reads those same bounded rows, and
bounding runs in one Spark job instead of in each (its keys are random, so each job would otherwise keep
another subset). The cached rows are private: they are unpersisted when the draft is done, also on error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure import draft_counts as counts
from privsyn_spark.measure.bounding import bound_contributions, check_id_columns
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.bound_choice import propose_bound, rows_per_id_grid
from privsyn_spark.privacy.unit import PrivacyUnit

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

BOUND_SHARE = 0.1
"""Share of a private draft's rho that chooses K (when a privacy id is given without a bound)."""


@contextmanager
def bounded_for_draft(df: DataFrame, ids: list[str], max_rows_per_id: int | None, rho: float,
                      accountant: Accountant, sampler: Any,
                      notes: list[str]) -> Iterator[tuple[DataFrame, PrivacyUnit, float]]:
    """The table bounded to K rows per id and cached (K proposed privately unless given), the unit, and
    the rho left for the columns; the cache is dropped on exit."""
    check_id_columns(PrivacyUnit(tuple(ids)), list(df.columns), ())
    if max_rows_per_id is None:
        cells = counts.rows_per_id_cells(df, ids, rows_per_id_grid().starts)
        proposed = propose_bound(cells, BOUND_SHARE * rho, accountant=accountant, sampler=sampler,
                                 privacy_unit=PrivacyUnit(tuple(ids)).name)
        del cells  # exact tallies stay here
        max_rows_per_id, rho = proposed.max_rows_per_id, (1.0 - BOUND_SHARE) * rho
        notes.append(f"privacy_unit: max_rows_per_id {max_rows_per_id} is the noisy {proposed.quantile:.0%} quantile "
                     f"of rows per id; it keeps about {proposed.rows_kept_share:.0%} of the rows (noisy estimate). "
                     "A larger K keeps more rows of heavy ids and adds proportionally more noise: review it")
    unit = PrivacyUnit(tuple(ids), int(max_rows_per_id))
    notes.append(f"columns drafted on the table bounded to {unit.bound} rows per id (sensitivity {unit.bound})")
    bounded = bound_contributions(df, unit).df.persist()
    try:
        bounded.write.format("noop").mode("overwrite").save()  # the one bounding job: the cache is filled
        yield bounded, unit, rho
    finally:
        bounded.unpersist()
