"""What a dataset's ledger rows say: its budget, the rho spent, each run's reservation (no Spark).

The ledger is insert-only; every row has a ``kind``:

- ``budget``: the dataset's total (epsilon, delta) and its rho, for one privacy unit (``privacy_unit``:
  ``row``, or the id column(s) of a person; NULL in older ledgers: a row); the latest one holds (a
  change needs ``budget set --replace`` and stays in the history);
- ``reserve``: a run's rho charged before it draws any noise, with the run's (epsilon, delta), its unit
  and bound K (``max_rows_per_id``), its
  fingerprint (input, schema hash, ...), the attempt that holds it and where its artifact goes;
- ``commit``: the artifact of a reservation's attempt is written: its location and SHA-256;
- ``refund``: the attempt failed before drawing any noise and its artifact provably does not
  exist; its rho no longer counts.

zCDP composes additively (Bun-Steinke 2016, Lemma 2.3): the dataset's spent rho is the sum of its
unrefunded reservations, and its spent epsilon is that rho converted at the dataset's delta.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta
from privsyn_spark.privacy.unit import ROW

BUDGET, RESERVE, COMMIT, REFUND = "budget", "reserve", "commit", "refund"


@dataclass(frozen=True)
class Budget:
    """A dataset's total privacy budget: (epsilon, delta) and the rho it converts to (CKS20 Cor. 13)."""

    epsilon: float
    delta: float
    rho: float
    privacy_unit: str = ROW  # what neighbouring tables differ by: a row, or a person of these id column(s)


def check_budget(epsilon: float, delta: float, privacy_unit: str = ROW) -> Budget:
    """The :class:`Budget` of (epsilon, delta); ``UsageError`` unless 0 < epsilon < inf, 0 < delta < 1."""
    check_epsilon_delta(epsilon, delta, "budget")
    return Budget(float(epsilon), float(delta), rho_from_eps_delta(float(epsilon), float(delta)), privacy_unit)


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


@dataclass(frozen=True)
class RunReservation:
    """A run's charged reservation; ``artifact_sha256`` is set once its attempt committed the artifact."""

    run_id: str
    seq: int
    attempt: str
    rho: float
    epsilon: float
    delta: float
    fingerprint: dict
    artifact: str
    artifact_sha256: str | None
    refunded: bool
    recorded_at: Any = None
    privacy_unit: str = ROW
    max_rows_per_id: int = 1

    @property
    def status(self) -> str:
        """``committed``, ``refunded`` or ``uncommitted`` (in flight, or crashed after drawing noise)."""
        return "refunded" if self.refunded else "committed" if self.artifact_sha256 else "uncommitted"


@dataclass
class DatasetState:
    """One dataset's budget, spending and reservations, folded from its ledger rows."""

    dataset_id: str
    budget: Budget | None = None
    budget_history: list[Budget] = field(default_factory=list)
    reservations: list[RunReservation] = field(default_factory=list)
    next_seq: int = 1

    @property
    def spent_rho(self) -> float:
        """Sum of the rho of every unrefunded reservation (zCDP composition)."""
        return float(sum(r.rho for r in self.reservations if not r.refunded))

    @property
    def left_rho(self) -> float:
        """rho still unspent (0 without a budget)."""
        return max(self.budget.rho - self.spent_rho, 0.0) if self.budget else 0.0

    def epsilon_of(self, rho: float) -> float | None:
        """``rho`` as epsilon at the dataset's delta (None without a budget)."""
        return eps_from_rho(rho, self.budget.delta) if self.budget else None

    def active(self, run_id: str) -> RunReservation | None:
        """The run's latest unrefunded reservation (a recharge supersedes an earlier one)."""
        held = [r for r in self.reservations if r.run_id == run_id and not r.refunded]
        return max(held, key=lambda r: r.seq) if held else None

    def of_attempt(self, attempt: str) -> RunReservation | None:
        """The reservation held by ``attempt``."""
        return next((r for r in self.reservations if r.attempt == attempt), None)


def fold(dataset_id: str, rows: Iterable[Mapping[str, Any]]) -> DatasetState:
    """The :class:`DatasetState` of a dataset's ledger rows (any order)."""
    rows = sorted(rows, key=lambda r: r["seq"])
    state = DatasetState(dataset_id, next_seq=max((int(r["seq"]) for r in rows), default=0) + 1)
    commits = {r["attempt"]: r for r in rows if r["kind"] == COMMIT}
    refunds = {r["attempt"] for r in rows if r["kind"] == REFUND}
    for r in rows:
        if r["kind"] == BUDGET:
            state.budget = Budget(float(r["epsilon"]), float(r["delta"]), float(r["rho"]), r.get("privacy_unit") or ROW)
            state.budget_history.append(state.budget)
        elif r["kind"] == RESERVE:
            commit = commits.get(r["attempt"])
            state.reservations.append(RunReservation(
                run_id=r["run_id"], seq=int(r["seq"]), attempt=r["attempt"], rho=float(r["rho"]),
                epsilon=float(r["epsilon"]), delta=float(r["delta"]), fingerprint=json.loads(r["fingerprint"] or "{}"),
                artifact=(commit or r)["artifact"], artifact_sha256=commit["artifact_sha256"] if commit else None,
                refunded=r["attempt"] in refunds, recorded_at=r.get("recorded_at"),
                privacy_unit=r.get("privacy_unit") or ROW, max_rows_per_id=int(r.get("max_rows_per_id") or 1)))
    return state


def unit_mismatch(budget: Budget, privacy_unit: str) -> str | None:
    """Why a release for ``privacy_unit`` may not be charged to ``budget`` (None when it is the budget's unit):
    composing row-level and person-level charges on one budget would be wrong accounting."""
    if budget.privacy_unit == privacy_unit:
        return None
    def say(u: str) -> str:
        return "one row" if u == ROW else f"the person of id {u!r}"
    return (f"the dataset's budget is set for {say(budget.privacy_unit)} as the privacy unit, this release is "
            f"for {say(privacy_unit)}; use the budget's unit (or another dataset id)")


def fingerprint_mismatch(held: Mapping[str, Any], asked: Mapping[str, Any]) -> str | None:
    """``name: held vs asked`` for every field that differs (None when the run asks the same)."""
    diffs = [f"{k} {held.get(k)!r} (now {asked.get(k)!r})" for k in sorted(set(held) | set(asked))
             if held.get(k) != asked.get(k)]
    return ", ".join(diffs) or None


def describe(state: DatasetState) -> list[str]:
    """Lines of ``budget show`` for one dataset: total, spent, left (epsilon at its delta), releases."""
    lines = [f"dataset {state.dataset_id!r}"]
    if state.budget is None:
        lines.append("  budget: not set (runs are refused until `privsyn-spark budget set`)")
    else:
        b = state.budget
        lines.append(f"  budget: epsilon={b.epsilon:.6g} at delta={b.delta:.3g} (rho={b.rho:.6g}), privacy unit "
                     f"{b.privacy_unit if b.privacy_unit == ROW else 'id ' + b.privacy_unit}"
                     + (f"; changed {len(state.budget_history) - 1} time(s)" if len(state.budget_history) > 1 else ""))
        lines.append(f"  spent:  epsilon={state.epsilon_of(state.spent_rho):.6g} (rho={state.spent_rho:.6g}, "
                     f"zCDP composition of {sum(not r.refunded for r in state.reservations)} releases)")
        lines.append(f"  left:   epsilon={state.epsilon_of(state.left_rho):.6g} (rho={state.left_rho:.6g})")
    for r in state.reservations:
        bound = f" max_rows_per_id={r.max_rows_per_id}" if r.privacy_unit != ROW else ""
        lines.append(f"  #{r.seq} run {r.run_id!r}: epsilon={r.epsilon:.6g} delta={r.delta:.3g} rho={r.rho:.6g}{bound} "
                     f"{r.status} {r.recorded_at or ''}".rstrip())
    return lines
