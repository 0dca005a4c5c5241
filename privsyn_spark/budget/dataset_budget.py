"""A dataset's budget and the checks of the budget arguments a run or ``budget set`` is given (no Spark).

A budget is (epsilon, delta) for one privacy unit, converted to zCDP rho (CKS20 Cor. 13); a per-partition
budget gives each partition of a column the whole budget (parallel composition: McSherry 2009, Thm. 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from privsyn_spark.privacy.unit import ROW


class NoBudget(BudgetRefused):
    """The dataset has no budget in the ledger: ``privsyn-spark budget set`` first."""


@dataclass(frozen=True)
class Budget:
    """A dataset's total privacy budget: (epsilon, delta) and the rho it converts to (CKS20 Cor. 13)."""

    epsilon: float
    delta: float
    rho: float
    privacy_unit: str = ROW  # what neighbouring tables differ by: a row, or a person of these id column(s)
    per_partition: str | None = None  # each partition of this column has the whole budget (parallel composition)
    constant_per_person: bool = False  # the operator declared per_partition constant per person (a person unit)

    @property
    def undeclared(self) -> str | None:
        """Why this budget's parallel composition is unsound as set (None when it is sound): a person unit
        budgeted per partition without the declaration that the partition column is constant per person."""
        if self.privacy_unit == ROW or not self.per_partition or self.constant_per_person:
            return None
        return (f"a per-partition budget ({self.per_partition!r}) for a person (id {self.privacy_unit!r}) holds only "
                f"when {self.per_partition!r} is constant per person (a person's rows spanning partitions are "
                f"charged once per partition); declare it with --partition-constant-per-person "
                f"(partition_constant_per_person=True) or use a shared budget")


def check_budget(epsilon: float, delta: float, privacy_unit: str = ROW, per_partition: str | None = None,
                 constant_per_person: bool = False) -> Budget:
    """The :class:`Budget` of (epsilon, delta); ``UsageError`` unless 0 < epsilon < inf, 0 < delta < 1, and
    for a person unit budgeted per partition unless ``constant_per_person`` declares the column constant per
    person (parallel composition needs every person's rows in one partition: McSherry 2009, Thm. 4)."""
    check_epsilon_delta(epsilon, delta, "budget")
    if constant_per_person and not (per_partition and privacy_unit != ROW):
        raise UsageError("--partition-constant-per-person (partition_constant_per_person=True) declares a "
                         "per-partition column constant per person: it needs --per-partition and --privacy-id")
    budget = Budget(float(epsilon), float(delta), rho_from_eps_delta(float(epsilon), float(delta)), privacy_unit,
                    per_partition or None, bool(constant_per_person))
    if budget.undeclared:
        raise UsageError(budget.undeclared)
    return budget


def check_epsilon_delta(epsilon: float, delta: float, what: str = "run") -> None:
    """``UsageError`` unless epsilon is finite and > 0 and delta is in (0, 1) (NaN and inf refused)."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"{what} epsilon must be a finite number > 0, got {epsilon}")
    if not (isinstance(delta, (int, float)) and math.isfinite(delta) and 0 < delta < 1):
        raise UsageError(f"{what} delta must be a number in (0, 1), got {delta}")


def check_ledger_choice(ledger: str | None, dataset_id: str | None, no_ledger: bool, recharge: bool = False,
                        required: bool = True) -> None:
    """The ledger rules of a run (the CLI's and the API's, named both ways): a ledger with a dataset id,
    or an explicit ``no_ledger`` (unless not ``required``); never both; ``recharge`` only with a ledger.
    Empty strings (an Airflow DAG's unset params) count as not given."""
    if ledger and no_ledger:
        raise UsageError("give --ledger or --no-ledger (ledger=... or no_ledger=True), not both")
    if required and not ledger and not no_ledger:
        raise UsageError("a run needs a budget ledger: --ledger L --dataset-id ID (ledger=..., dataset_id=...; the "
                         "dataset's budget from `privsyn-spark budget set`), or --no-ledger (no_ledger=True) to run "
                         "without any limit or record")
    if ledger and not dataset_id:
        raise UsageError("--ledger needs --dataset-id (dataset_id=...): the dataset's key in the ledger, never "
                         "derived from the input")
    if recharge and not ledger:
        raise UsageError("--recharge (recharge=True) needs --ledger")




def unit_mismatch(budget: Budget, privacy_unit: str) -> str | None:
    """Why a release for ``privacy_unit`` may not be charged to ``budget`` (None when it is the budget's unit):
    composing row-level and person-level charges on one budget would be wrong accounting."""
    if budget.privacy_unit == privacy_unit:
        return None
    def say(u: str) -> str:
        return "one row" if u == ROW else f"the person of id {u!r}"
    return (f"the dataset's budget is set for {say(budget.privacy_unit)} as the privacy unit, this release is "
            f"for {say(privacy_unit)}; use the budget's unit (or another dataset id)")
