"""The measure stage of a people run: its three measurements through one accountant, in one artifact.

The person table and the row table are each measured by :func:`~privsyn_spark.release.measure_table.measure_table`
(PrivSyn's two engine passes around the privacy core) on their persisted codes, the person table at
sensitivity 1 (its unit is one row: a person is one row there), the row table at the person unit (K);
the degree histogram is noised at sensitivity 1 (:mod:`privsyn_spark.privacy.people`). One
:class:`~privsyn_spark.privacy.accounting.Accountant` holds the run's rho; each part spends its
:class:`~privsyn_spark.privacy.people.PeopleSplit` share through
:meth:`~privsyn_spark.privacy.accounting.Accountant.part` (ledger names ``persons/``, ``degrees``,
``rows/``). The artifact is the row table's measurements carrying the person table's (``persons``) and
the histogram (``degrees``), its ledger the whole release's: the caller persists it once, under one
ledger reservation (:mod:`privsyn_spark.release.guard`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.measure.packing import PackedCodes
from privsyn_spark.privacy.accounting import Accountant, RunBudget
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.privacy.noise import NoiseSampler, gaussian_mechanism
from privsyn_spark.privacy.people import PeopleSplit, degree_sensitivity
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.progress import SILENT, Progress
from privsyn_spark.release.measure_table import measure_table
from privsyn_spark.select.selection_config import SelectionConfig

if TYPE_CHECKING:
    import numpy as np

    from privsyn_spark.run_record import RunRecord

DEFAULT_SPLIT = PeopleSplit()
DEGREES = ("degree",)
"""The attribute name of the degree histogram (its cells: 1..M rows)."""


def measure_people(persons: Callable[[], PackedCodes], rows: Callable[[], PackedCodes],
                   degree_counts: Callable[[], np.ndarray], *, run_id: str, schema_hashes: tuple[str, str],
                   budget: RunBudget, sampler: NoiseSampler, record: RunRecord, unit: PrivacyUnit,
                   people_split: PeopleSplit = DEFAULT_SPLIT, split: BudgetSplit = BudgetSplit(),
                   selection: SelectionConfig = SelectionConfig(), max_cells: int = DEFAULT_MAX_CELLS,
                   log_exact_counts: bool = False, progress: Progress = SILENT) -> Measurements:
    """The people run's artifact (module docstring). ``persons``/``rows``: the two tables' persisted codes
    (each written on its call, the persons first: the one scan of the input), ``degree_counts``: the exact
    histogram over 1..M (observed while the person table was written); ``schema_hashes``: the person and row
    tables'."""
    accountant = Accountant(budget.rho, delta=budget.delta)
    rhos = people_split.rhos(budget.rho)

    def measured(packed: PackedCodes, part: str, schema_hash: str, part_unit: PrivacyUnit) -> Measurements:
        return measure_table(packed, run_id=run_id, schema_hash=schema_hash, budget=dataclasses.replace(
            budget, rho=rhos[part]), sampler=sampler, record=record, split=split, selection=selection,
            max_cells=max_cells, log_exact_counts=log_exact_counts, unit=part_unit, progress=progress,
            accountant=accountant.part(f"{part}/", rhos[part]))

    with progress.phase("measure: reading the keyed input once and encoding its person table"):
        person_codes = persons()  # the person job fills the degree observation
    counts = degree_counts()
    measured_persons = measured(person_codes, "persons", schema_hashes[0], PrivacyUnit())  # a person: one row
    noisy, sigma = gaussian_mechanism(counts, rhos["degrees"], accountant=accountant, sampler=sampler,
                                      name="degrees", sensitivity=degree_sensitivity(), privacy_unit=unit.name,
                                      max_rows_per_id=unit.bound)
    with progress.phase("measure: encoding the row table (K rows per person)"):
        row_codes = rows()
    measured_rows = measured(row_codes, "rows", schema_hashes[1], unit)
    if not accountant.is_exhausted():  # every part spends its whole share
        raise RuntimeError(f"people release spent rho={accountant.spent} of {budget.rho}")
    return dataclasses.replace(measured_rows, persons=measured_persons, ledger=accountant.ledger, rho=budget.rho,
                               degrees=NoisyMarginal(DEGREES, noisy, sigma, rhos["degrees"]))
