"""A dataset's budget as the ledger holds it, in plain numbers (:class:`BudgetState`, :func:`budget_states`):
what ``budget show`` states, for the API, jobs/ and the Airflow DAG.

>>> from privsyn_spark import budget_states  # doctest: +SKIP
>>> budget_states(spark, "runs/ledger", "adult")[0].left_epsilon  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.ledger import all_datasets, dataset_state
from privsyn_spark.budget.ledger_state import DatasetState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class BudgetState:
    """One dataset's budget as the ledger holds it, in plain numbers (:func:`budget_states`).

    ``epsilon``/``delta``: the total budget (None when not set); ``spent_epsilon``/``left_epsilon``: at
    that delta (zCDP composition, as ``budget show`` states them; ``left_*`` None with a per-partition
    budget, whose partitions each have their own); ``guarantee``: the dataset's (epsilon, delta) in words;
    ``releases``: the charged, unrefunded reservations; ``state``: the full ledger state behind it.
    """

    dataset_id: str
    epsilon: float | None
    delta: float | None
    privacy_unit: str | None
    per_partition: str | None
    spent_rho: float
    spent_epsilon: float | None
    left_rho: float | None
    left_epsilon: float | None
    releases: int
    guarantee: str
    state: DatasetState = field(repr=False, compare=False)

    @classmethod
    def of(cls, state: DatasetState) -> BudgetState:
        """The plain view of a ledger's :class:`DatasetState`."""
        b = state.budget
        shared = b is None or b.per_partition is None
        return cls(state.dataset_id, b.epsilon if b else None, b.delta if b else None, b.privacy_unit if b else None,
                   b.per_partition if b else None, state.spent_rho, state.epsilon_of(state.spent_rho),
                   state.left_rho if shared else None, state.epsilon_of(state.left_rho) if shared else None,
                   sum(not r.refunded for r in state.reservations), state.guarantee(), state)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (without ``state``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "state"}


def budget_states(spark: SparkSession, ledger: str, dataset_id: str | None = None) -> list[BudgetState]:
    """What the ledger holds for ``dataset_id`` (every dataset when None): budget, spent, left, releases
    (:func:`local_states` reads a local path ledger without Spark)."""
    states = [dataset_state(spark, ledger, dataset_id)] if dataset_id else all_datasets(spark, ledger)
    return [BudgetState.of(state) for state in states]
