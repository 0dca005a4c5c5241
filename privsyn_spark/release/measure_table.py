"""The measure stage on the input's packed codes: the two engine passes around the privacy core.

First pass: every 1-way and 2-way marginal (exact, never leaves this function); the domain
policies are applied to it, the 1-way tables go to the privacy core and the 2-way tables only as
their InDif scores (PrivSyn Section 4.1). Second pass: the marginals selection chose, counted on
request of :func:`privsyn_spark.privacy.release.measure_privately`, which adds the noise.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure.engine import (
    DEFAULT_MAX_CELLS,
    check_domain_policies,
    count_marginals,
    one_and_two_way,
    policy_tallies,
)
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.measure.packing import PackedCodes
from privsyn_spark.privacy.accounting import Accountant, RunBudget
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.noise import NoiseSampler
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.progress import SILENT, Progress
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.schema.columns import CategoricalColumn
from privsyn_spark.select.selection_config import SelectionConfig

if TYPE_CHECKING:
    import numpy as np

    from privsyn_spark.run_record import RunRecord

PASSES = 2
"""Engine passes of a measure step: all 1- and 2-way marginals, then the selected ones."""


def measure_table(packed: PackedCodes, *, run_id: str, schema_hash: str, budget: RunBudget,
                  sampler: NoiseSampler, record: RunRecord, split: BudgetSplit = BudgetSplit(),
                  selection: SelectionConfig = SelectionConfig(), max_cells: int = DEFAULT_MAX_CELLS,
                  log_exact_counts: bool = False, unit: PrivacyUnit = PrivacyUnit(),
                  progress: Progress = SILENT, accountant: Accountant | None = None) -> Measurements:
    """The private measurements of the table ``packed`` (the run's persisted codes); the domain
    policies' tallies go to ``record.domain_handling`` (operators only), the passes' seconds to its
    timings; ``packed`` holds the rows bounded to ``unit``'s K per id (the sensitivities follow).
    The ``fail`` policies' tallies are released noisy with the rest (judged later, on the artifact:
    :mod:`privsyn_spark.privacy.policy_checks`). ``progress`` hears of each pass ("counting pass k of 2").
    ``accountant``: a part of a larger release's (a people run's), else the table's own."""
    with record.step("count 1+2-way"), progress.phase(f"measure: counting pass 1 of {PASSES} (1- and 2-way)"):
        first = count_marginals(packed, one_and_two_way(packed.domain), max_cells=max_cells)
    record.domain_handling = check_domain_policies(packed, first, log_exact_counts=log_exact_counts)
    tallies = policy_tallies(packed, first)
    one_way: dict[tuple[str, ...] | str, np.ndarray] = {m: t for m, t in first.tables.items() if len(m) == 1}
    scores = indif_scores({m: t for m, t in first.tables.items() if len(m) == 2})
    del first  # exact counts stay inside this step

    counting = [0.0]  # seconds of the second engine pass, inside measure_privately

    def engine(marginals: Any, recode: Any) -> Any:
        start = time.perf_counter()
        with record.step("count selected"), progress.phase(f"measure: counting pass 2 of {PASSES} (selected)"):
            tables = count_marginals(packed, marginals, recode, max_cells=max_cells).tables
        counting[0] += time.perf_counter() - start
        return tables

    start = time.perf_counter()
    pairs = len(packed.domain) * (len(packed.domain) - 1) // 2
    progress.say(f"measure: noise and selection over {pairs} attribute pairs (InDif of each)")
    measurements = measure_privately(one_way, scores, engine, packed.domain, run_id=run_id, schema_hash=schema_hash,
                                     budget=budget, sampler=sampler, split=split, selection=selection,
                                     unit=unit, policy_counts=tallies, accountant=accountant,
                                     hierarchies={c.name: c.prefix_levels() for c in packed.schema.view.columns
                                                  if isinstance(c, CategoricalColumn) and c.hierarchy})
    record.timings["noise+select"] = time.perf_counter() - start - counting[0]
    return measurements
