"""The budget ledger's operations: a dataset's budget, and a run's reservation protocol.

``set_budget`` stores a dataset's total budget; a run calls ``reserve`` (charge its rho before any noise
is drawn, or get back the reservation it already holds), then ``commit`` (its artifact written) or
``refund`` (it failed before drawing noise). Each is one row decided on the dataset's current state and
inserted by :func:`~privsyn_spark.budget.ledger_table.append_row` (the Delta table and the concurrency
protocol that keeps a dataset's spent rho within its budget); the reads (``dataset_state``,
``all_datasets``, ``read_ledger``, ``local_states``) and ``LedgerContention`` are re-exported from there, the
refusals of a missing or damaged ledger from :mod:`~privsyn_spark.budget.ledger_store`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.dataset_budget import Budget, NoBudget, check_budget, unit_mismatch
from privsyn_spark.budget.fingerprint_check import fingerprint_mismatch, mismatch_message
from privsyn_spark.budget.ledger_state import (
    BUDGET,
    COMMIT,
    DRAWN,
    NONPRIVATE,
    REFUND,
    RESERVE,
    DatasetState,
    RunReservation,
    partition_label,
    runs_left,
)
from privsyn_spark.budget.ledger_store import LedgerDamaged, LedgerMissing, require_ledger  # noqa: F401
from privsyn_spark.budget.ledger_table import (  # noqa: F401  (re-exported: the ledger's API in one place)
    LedgerContention,
    all_datasets,
    append_row,
    dataset_state,
    local_states,
    read_ledger,
)
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import RHO_TOLERANCE, rho_from_eps_delta
from privsyn_spark.privacy.unit import ROW, PrivacyUnit

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

class BudgetExhausted(BudgetRefused):
    """The dataset's cumulative spending plus the run's own would exceed its total budget (the
    partition's, with a per-partition budget: ``partition`` is its ``column=value``)."""

    def __init__(self, state: DatasetState, asked: float, epsilon: float, delta: float, extra_delta: float = 0.0,
                 run_id: str | None = None, partition: str = ""):
        assert state.budget is not None
        value = partition.split("=", 1)[1] if partition and state.budget.per_partition else None
        spent = state.spent_rho if value is None else state.spent_in(value)
        left = state.left_for(None) if value is None else state.left_in(value)
        self.dataset_id, self.spent, self.asked, self.run_id = state.dataset_id, spent, asked, run_id
        self.budget = state.budget_rho(extra_delta, value)
        b, who = state.budget, f"run {run_id!r} " if run_id else ""
        where = f" (partition {partition})" if partition else ""
        extra = f" + delta={extra_delta:.3g} outside zCDP" if extra_delta else ""
        super().__init__(f"privacy budget of dataset {state.dataset_id!r}{where} exhausted: {who}asks epsilon="
                         f"{epsilon:.6g} at delta={delta:.3g} (rho={asked:.6g}{extra}); already spent epsilon="
                         f"{state.epsilon_of(spent, value):.6g} at delta={b.delta:.3g} (rho={spent:.6g}) "
                         f"of the budget epsilon={b.epsilon:.6g} at delta={b.delta:.3g} (left epsilon="
                         f"{state.epsilon_of(left, value):.6g}, rho={left:.6g})")


class UnitMismatch(UsageError):
    """A release for another privacy unit than the one the dataset's budget is set for."""
class MixedBudget(BudgetRefused):
    """A shared run on a per-partition budget (or the other way round): refused, never mixed."""


class RunMismatch(UsageError):
    """A run id that already holds a reservation is asked for different epsilon/delta/schema/input."""


@dataclass(frozen=True)
class Reservation:
    """A run's reservation as one call saw it; ``charged`` is True when this call inserted it (then
    this call's ``attempt`` holds it and is the only one that may draw the noise)."""

    dataset_id: str
    held: RunReservation
    charged: bool
    spent_before: float

    @property
    def run_id(self) -> str:
        return self.held.run_id

    @property
    def rho(self) -> float:
        return self.held.rho

    @property
    def seq(self) -> int:
        return self.held.seq


def set_budget(spark: SparkSession, ledger: str, dataset_id: str, epsilon: float, delta: float,
               replace: bool = False, privacy_unit: str = ROW, per_partition: str | None = None,
               partition_constant_per_person: bool = False) -> Budget:
    """Store the dataset's total budget (epsilon at delta, for the privacy unit ``privacy_unit``: ``row``
    or the id column(s) joined by commas). Setting the same budget again is a no-op; a different one
    is refused (``UsageError``) unless ``replace`` (recorded; earlier rows stay).

    ``per_partition``: the budget holds for each partition of that column on its own (parallel
    composition): every run must then be scoped to one value of it. Sound when each privacy unit's
    rows lie in one partition (always for the one-row unit; for a person only when the column is
    constant per person: refused for a person unless ``partition_constant_per_person`` declares it,
    a declaration recorded with the budget and stated by ``budget show``). A dataset that has spent
    under one kind of budget cannot switch to the other (shared and per-partition runs never mix)."""
    if not dataset_id:
        raise UsageError("a dataset id is required")
    budget = check_budget(epsilon, delta, privacy_unit, per_partition, partition_constant_per_person)

    def decide(state: DatasetState) -> Any:
        if state.budget == budget:
            return None
        if state.budget is not None and not replace:
            raise UsageError(f"dataset {dataset_id!r} already has a budget (epsilon={state.budget.epsilon:g} at "
                             f"delta={state.budget.delta:g}, privacy unit {state.budget.privacy_unit}); changing it "
                             f"needs --replace")
        if state.budget is not None and state.reservations and state.budget.privacy_unit != budget.privacy_unit:
            raise UsageError(f"dataset {dataset_id!r} has releases charged for privacy unit "
                             f"{state.budget.privacy_unit}; its unit cannot change (use another dataset id)")
        before = state.budget.per_partition if state.budget else None
        if before != budget.per_partition and any(not r.refunded for r in state.reservations):
            raise MixedBudget(f"dataset {dataset_id!r} has spent under a {_kind(before)} budget; it cannot become "
                              f"{_kind(budget.per_partition)} (shared and per-partition runs never mix): use a "
                              f"new dataset id")
        return {"kind": BUDGET, "rho": budget.rho, "epsilon": budget.epsilon, "delta": budget.delta,
                "privacy_unit": budget.privacy_unit, "per_partition": budget.per_partition,
                "fingerprint": json.dumps({"partition_constant_per_person": True}) if budget.constant_per_person
                else None}

    row, _ = append_row(spark, ledger, dataset_id, decide, create=True)
    if row is not None:
        log.info("ledger %s: dataset %s budget epsilon=%g at delta=%g (rho=%.6g, %s)", ledger, dataset_id,
                 budget.epsilon, budget.delta, budget.rho, _kind(budget.per_partition))
    return budget


def _kind(per_partition: str | None) -> str:
    return f"per-partition ({per_partition})" if per_partition else "shared"


def check_fits(state: DatasetState, run_id: str | None, rho: float, partition: Mapping[str, str] | None,
               epsilon: float, delta: float, extra_delta: float = 0.0) -> None:
    """Raise the refusal a new reservation of ``rho`` (and ``extra_delta`` outside zCDP) scoped to
    ``partition`` would meet: no budget, a shared run on a per-partition budget, or the budget (the
    partition's) exhausted."""
    if state.budget is None:
        raise NoBudget(f"dataset {state.dataset_id!r} has no budget in the ledger: set it once with "
                       f"`privsyn-spark budget set --dataset-id {state.dataset_id} --epsilon E --delta D`")
    if state.budget.undeclared:  # a budget set before the declaration was required
        raise MixedBudget(f"dataset {state.dataset_id!r}: {state.budget.undeclared} (budget set --replace)")
    column = state.budget.per_partition
    if column is not None and column not in (partition or {}):
        raise MixedBudget(f"dataset {state.dataset_id!r} is budgeted per partition of {column!r}: a run must be "
                          f"scoped to one (--partition {column}=VALUE); shared runs are refused")
    left = state.left_for(partition, extra_delta)
    if rho > left + state.budget.rho * RHO_TOLERANCE:
        where = f"{column}={partition[column]}" if column and partition else ""
        raise BudgetExhausted(state, rho, epsilon, delta, extra_delta, run_id, where)


def check_run(state: DatasetState, run_id: str | None, epsilon: float, delta: float,
              partition: Mapping[str, str] | None = None) -> str:
    """The forecast of one run (``budget check``, the DAG's first task): a line saying it fits and how
    many more runs at its epsilon fit after it; raises the refusal its reservation would meet."""
    rho = rho_from_eps_delta(epsilon, delta)
    held = state.active(run_id) if run_id else None
    where = f" [{partition_label(partition)}]" if partition else ""
    if held is not None:
        return (f"dataset {state.dataset_id!r}: run {run_id!r}{where} already holds reservation #{held.seq} "
                f"({held.status}); it reuses its measurements and is charged nothing more")
    check_fits(state, run_id, rho, partition, epsilon, delta)
    after = state.left_for(partition) - rho
    assert state.budget is not None
    column = state.budget.per_partition
    value = dict(partition or {})[column] if column else None
    scope = f"partition {column}={value}" if column else "the dataset"
    return (f"dataset {state.dataset_id!r}: run {run_id or '(new)'!r}{where} fits (epsilon={epsilon:g}, "
            f"rho={rho:.6g}); left on {scope} after it: epsilon={state.epsilon_of(max(after, 0.0), value):.6g} "
            f"(rho={max(after, 0.0):.6g}), {runs_left(max(after, 0.0), rho)} more run(s) at epsilon={epsilon:g}")


def reserve(spark: SparkSession, ledger: str, dataset_id: str, run_id: str, *, rho: float, epsilon: float, delta: float,
            fingerprint: dict, artifact: str, attempt: str | None = None,
            recharge_of: int | None = None, unit: PrivacyUnit = PrivacyUnit(),
            partition: Mapping[str, str] | None = None, extra_delta: float = 0.0) -> Reservation:
    """Charge ``rho`` to ``dataset_id`` for ``run_id`` before any noise is drawn, or find its reservation.

    A run id with a reservation gets it back uncharged (``charged=False``: the caller must reuse its
    artifact and draw nothing); asking it with another fingerprint raises :class:`RunMismatch`.
    ``recharge_of=seq`` charges a fresh reservation in place of the run's reservation ``seq`` (its
    artifact was lost; the lost release stays charged). Raises :class:`NoBudget` without a budget,
    :class:`BudgetExhausted` when spent + ``rho`` would exceed it (the budget's rho after the extra
    deltas spent outside zCDP, this one's ``extra_delta`` included: :mod:`~privsyn_spark.budget.ledger_state`;
    the partition's spent, with a per-partition budget: ``partition`` holds the run's scoped values,
    recorded with the reservation), :class:`UnitMismatch` (exit 2) when ``unit`` is not the unit the
    dataset's budget is set for; all before anything is charged.
    """
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    attempt = attempt or uuid.uuid4().hex
    found: list[RunReservation] = []

    def decide(state: DatasetState) -> Any:
        found.clear()
        if state.budget is None:
            raise NoBudget(f"dataset {dataset_id!r} has no budget in ledger {ledger}: set it once with "
                           f"`privsyn-spark budget set --ledger {ledger} --dataset-id {dataset_id} "
                           "--epsilon E --delta D`")
        why = unit_mismatch(state.budget, unit.name)
        if why:
            raise UnitMismatch(f"dataset {dataset_id!r}: {why}")
        held = state.active(run_id)
        if held is not None:
            diff = fingerprint_mismatch(held.fingerprint, fingerprint)
            if diff:
                raise RunMismatch(mismatch_message(run_id, diff))
            if recharge_of is None or held.seq != recharge_of:
                found.append(held)
                return None
        check_fits(state, run_id, rho, partition, epsilon, delta, extra_delta)
        return {"kind": RESERVE, "run_id": run_id, "rho": float(rho), "epsilon": float(epsilon),
                "delta": float(delta), "attempt": attempt, "artifact": artifact,
                "fingerprint": json.dumps(fingerprint, sort_keys=True), **unit.record(),
                "partition_values": json.dumps(dict(partition), sort_keys=True) if partition else None,
                "extra_delta": float(extra_delta)}

    row, state = append_row(spark, ledger, dataset_id, decide)
    if row is None:
        held = found[0]
        log.info("run %s holds reservation #%d of dataset %s (%s): nothing charged", run_id, held.seq,
                 dataset_id, held.status)
        return Reservation(dataset_id, held, charged=False, spent_before=state.spent_rho - held.rho)
    held = RunReservation(run_id=run_id, seq=row["seq"], attempt=attempt, rho=float(rho), epsilon=float(epsilon),
                          delta=float(delta), fingerprint=fingerprint, artifact=artifact, artifact_sha256=None,
                          refunded=False, recorded_at=row["recorded_at"], privacy_unit=unit.name,
                          max_rows_per_id=unit.bound, partition=dict(partition) if partition else None,
                          extra_delta=float(extra_delta), records_draws=True)
    assert state.budget is not None  # decide() refuses a dataset without a budget
    log.info("run %s reserved rho=%.6g of dataset %s (#%d; spent before %.6g of %.6g)", run_id, rho, dataset_id,
             row["seq"], state.spent_rho, state.budget.rho)
    return Reservation(dataset_id, held, charged=True, spent_before=state.spent_rho)


def commit(spark: SparkSession, ledger: str, reservation: Reservation, artifact: str, sha256: str,
           max_rows_per_id: int | None = None) -> None:
    """Record that the reservation's attempt wrote its artifact (location and content hash); ``max_rows_per_id``:
    the bound K the release used when it was chosen after the reservation (a draft's private K)."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState) -> Any:
        mine = state.of_attempt(attempt)
        if mine is None or mine.refunded:
            raise RuntimeError(f"run {reservation.run_id!r}: no live reservation of attempt {attempt} to commit")
        if mine.artifact_sha256 is not None:
            if mine.artifact_sha256 != sha256:
                raise RuntimeError(f"run {reservation.run_id!r}: attempt {attempt} committed another artifact")
            return None
        return {"kind": COMMIT, "run_id": reservation.run_id, "attempt": attempt, "artifact": artifact,
                "artifact_sha256": sha256, "max_rows_per_id": max_rows_per_id}

    append_row(spark, ledger, reservation.dataset_id, decide)


def refund(spark: SparkSession, ledger: str, reservation: Reservation) -> bool:
    """Cancel a reservation whose attempt drew no noise and wrote no artifact (the caller checks the
    artifact); never after a commit nor after its attempt's ``drawn`` row. True if it was refunded."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState) -> Any:
        mine = state.of_attempt(attempt)
        if mine is None or mine.refunded or mine.drawn or mine.artifact_sha256 is not None:
            return None
        return {"kind": REFUND, "run_id": reservation.run_id, "attempt": attempt, "rho": mine.rho}

    row, _ = append_row(spark, ledger, reservation.dataset_id, decide)
    if row is not None:
        log.info("run %s failed before drawing noise: reservation #%d of dataset %s refunded",
                 reservation.run_id, reservation.seq, reservation.dataset_id)
    return row is not None


class ReservationTakenOver(RuntimeError):
    """The attempt's reservation was refunded (a retry took it over) before it drew any noise: it must not draw."""


def mark_drawn(spark: SparkSession, ledger: str, reservation: Reservation) -> None:
    """Record, before the attempt's first noise draw, that it is drawing: from then on its reservation is
    never refunded nor taken over. Raises :class:`ReservationTakenOver` when it no longer holds it."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState) -> dict[str, Any] | None:
        mine = state.of_attempt(attempt)
        if mine is None or mine.refunded:
            raise ReservationTakenOver(f"run {reservation.run_id!r}: attempt {attempt} no longer holds its "
                                       f"reservation (a retry took it over); no noise drawn")
        return None if mine.drawn else {"kind": DRAWN, "run_id": reservation.run_id, "attempt": attempt}

    append_row(spark, ledger, reservation.dataset_id, decide)


def record_nonprivate(spark: SparkSession, ledger: str, dataset_id: str, run_id: str, what: str) -> None:
    """Record a non-private read of the dataset (``what``, e.g. ``infer-schema --non-private``) before it
    happens: ``budget show`` then states that the dataset has no (epsilon, delta) guarantee."""
    append_row(spark, ledger, dataset_id, lambda state: {
        "kind": NONPRIVATE, "run_id": run_id, "fingerprint": json.dumps({"step": what})})
    log.warning("ledger %s: recorded a NON-PRIVATE read of dataset %s (%s)", ledger, dataset_id, what)
