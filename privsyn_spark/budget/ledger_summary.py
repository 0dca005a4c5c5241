"""The dataset's ledger after a run, as its report shows it: spent, budget and left, in rho and epsilon (no Spark)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privsyn_spark.budget.ledger_state import DatasetState


def ledger_summary(held: DatasetState, ledger: str, dataset_id: str, run_id: str,
                   scope: Mapping[str, str] | None = None, scope_label: str | None = None) -> dict[str, Any]:
    """What ``held`` (the dataset's ledger state) says after run ``run_id`` (scoped to ``scope``): the rho
    spent (on the run's partition with a per-partition budget), the budget's and the rho left; with a
    budget, the same in epsilon at the budget's delta (:meth:`DatasetState.epsilon_of`, CKS20 Cor. 13:
    sequential zCDP composition, so epsilons do not add), and that delta."""
    active = held.active(run_id)
    partition = held.partition_of(active) if active is not None else None
    spent = held.spent_rho if partition is None else held.spent_in(partition)
    left = held.left_for(scope)
    out: dict[str, Any] = {"ledger": ledger, "dataset_id": dataset_id, "spent_rho": spent,
                           "budget_rho": held.budget.rho if held.budget is not None else None, "left_rho": left}
    if held.budget is not None:
        out.update(spent_epsilon=held.epsilon_of(spent, partition), budget_epsilon=held.budget.epsilon,
                   left_epsilon=held.epsilon_of(left, partition), budget_delta=held.budget.delta)
    if scope_label:
        out["partition"] = scope_label
    return out
