"""The budget ledger's operations: a dataset's budget, and a run's reservation protocol.

``set_budget`` stores a dataset's total budget; a run calls ``reserve`` (charge its rho before any noise
is drawn, or get back the reservation it already holds), then ``commit`` (its artifact written) or
``refund`` (it failed before drawing noise). Each is one row decided on the dataset's current state and
inserted by :func:`~privsyn_spark.budget.ledger_table.append_row` (the Delta table and the concurrency
protocol that keeps a dataset's spent rho within its budget); the reads (``dataset_state``,
``all_datasets``, ``read_ledger``) and ``LedgerContention`` are re-exported from there.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privsyn_spark.budget.ledger_state import (
    BUDGET,
    COMMIT,
    DRAWN,
    NONPRIVATE,
    REFUND,
    RESERVE,
    Budget,
    DatasetState,
    NoBudget,
    RunReservation,
    check_budget,
    fingerprint_mismatch,
)
from privsyn_spark.budget.ledger_table import (  # noqa: F401  (re-exported: the ledger's API in one place)
    LedgerContention,
    LedgerMissing,
    all_datasets,
    append_row,
    dataset_state,
    read_ledger,
    require_ledger,
)
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import RHO_TOLERANCE

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

class BudgetExhausted(BudgetRefused):
    """The dataset's cumulative spending plus the run's own would exceed its total budget."""

    def __init__(self, state: DatasetState, asked: float, epsilon: float, delta: float, extra_delta: float = 0.0,
                 run_id: str | None = None):
        assert state.budget is not None
        self.dataset_id, self.spent, self.asked, self.run_id = state.dataset_id, state.spent_rho, asked, run_id
        self.budget = state.budget_rho(extra_delta)
        b, who = state.budget, f"run {run_id!r} " if run_id else ""
        extra = f" + delta={extra_delta:.3g} outside zCDP" if extra_delta else ""
        super().__init__(f"privacy budget of dataset {state.dataset_id!r} exhausted: {who}asks epsilon="
                         f"{epsilon:.6g} at delta={delta:.3g} (rho={asked:.6g}{extra}); already spent epsilon="
                         f"{state.epsilon_of(state.spent_rho):.6g} at delta={b.delta:.3g} (rho={state.spent_rho:.6g}) "
                         f"of the budget epsilon={b.epsilon:.6g} at delta={b.delta:.3g} (left epsilon="
                         f"{state.epsilon_of(state.left_rho):.6g}, rho={state.left_rho:.6g})")


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
               replace: bool = False) -> Budget:
    """Store the dataset's total budget (epsilon at delta). Setting the same budget again is a no-op;
    a different one is refused (``UsageError``) unless ``replace`` (recorded; earlier rows stay)."""
    if not dataset_id:
        raise UsageError("a dataset id is required")
    budget = check_budget(epsilon, delta)

    def decide(state: DatasetState):
        if state.budget == budget:
            return None
        if state.budget is not None and not replace:
            raise UsageError(f"dataset {dataset_id!r} already has a budget (epsilon={state.budget.epsilon:g} at "
                             f"delta={state.budget.delta:g}); changing it needs --replace")
        return {"kind": BUDGET, "rho": budget.rho, "epsilon": budget.epsilon, "delta": budget.delta}

    row, _ = append_row(spark, ledger, dataset_id, decide, create=True)
    if row is not None:
        log.info("ledger %s: dataset %s budget epsilon=%g at delta=%g (rho=%.6g)", ledger, dataset_id,
                 budget.epsilon, budget.delta, budget.rho)
    return budget


def reserve(spark: SparkSession, ledger: str, dataset_id: str, run_id: str, *, rho: float, epsilon: float, delta: float,
            fingerprint: dict, artifact: str, attempt: str | None = None,
            recharge_of: int | None = None, extra_delta: float = 0.0) -> Reservation:
    """Charge ``rho`` to ``dataset_id`` for ``run_id`` before any noise is drawn, or find its reservation.

    A run id with a reservation gets it back uncharged (``charged=False``: the caller must reuse its
    artifact and draw nothing); asking it with another fingerprint raises :class:`RunMismatch`.
    ``recharge_of=seq`` charges a fresh reservation in place of the run's reservation ``seq`` (its
    artifact was lost; the lost release stays charged). Raises :class:`NoBudget` without a budget,
    :class:`BudgetExhausted` when spent + ``rho`` would exceed it (the budget's rho after the extra
    deltas spent outside zCDP, this one's ``extra_delta`` included: :mod:`~privsyn_spark.budget.ledger_state`).
    """
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    attempt = attempt or uuid.uuid4().hex
    found: list[RunReservation] = []

    def decide(state: DatasetState):
        found.clear()
        if state.budget is None:
            raise NoBudget(f"dataset {dataset_id!r} has no budget in ledger {ledger}: set it once with "
                           f"`privsyn-spark budget set --ledger {ledger} --dataset {dataset_id} --epsilon E --delta D`")
        held = state.active(run_id)
        if held is not None:
            diff = fingerprint_mismatch(held.fingerprint, fingerprint)
            if diff:
                raise RunMismatch(f"run id {run_id!r} was measured with other settings: {diff}; use a new run id")
            if recharge_of is None or held.seq != recharge_of:
                found.append(held)
                return None
        if state.spent_rho + rho > state.budget_rho(extra_delta) * (1.0 + RHO_TOLERANCE):
            raise BudgetExhausted(state, rho, epsilon, delta, extra_delta, run_id)
        return {"kind": RESERVE, "run_id": run_id, "rho": float(rho), "epsilon": float(epsilon),
                "delta": float(delta), "attempt": attempt, "artifact": artifact,
                "fingerprint": json.dumps(fingerprint, sort_keys=True), "extra_delta": float(extra_delta)}

    row, state = append_row(spark, ledger, dataset_id, decide)
    if row is None:
        held = found[0]
        log.info("run %s holds reservation #%d of dataset %s (%s): nothing charged", run_id, held.seq,
                 dataset_id, held.status)
        return Reservation(dataset_id, held, charged=False, spent_before=state.spent_rho - held.rho)
    held = RunReservation(run_id, row["seq"], attempt, float(rho), float(epsilon), float(delta), fingerprint,
                          artifact, None, False, row["recorded_at"], float(extra_delta), records_draws=True)
    assert state.budget is not None  # decide() refuses a dataset without a budget
    log.info("run %s reserved rho=%.6g of dataset %s (#%d; spent before %.6g of %.6g)", run_id, rho, dataset_id,
             row["seq"], state.spent_rho, state.budget.rho)
    return Reservation(dataset_id, held, charged=True, spent_before=state.spent_rho)


def commit(spark: SparkSession, ledger: str, reservation: Reservation, artifact: str, sha256: str) -> None:
    """Record that the reservation's attempt wrote its artifact (location and content hash)."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState):
        mine = state.of_attempt(attempt)
        if mine is None or mine.refunded:
            raise RuntimeError(f"run {reservation.run_id!r}: no live reservation of attempt {attempt} to commit")
        if mine.artifact_sha256 is not None:
            if mine.artifact_sha256 != sha256:
                raise RuntimeError(f"run {reservation.run_id!r}: attempt {attempt} committed another artifact")
            return None
        return {"kind": COMMIT, "run_id": reservation.run_id, "attempt": attempt, "artifact": artifact,
                "artifact_sha256": sha256}

    append_row(spark, ledger, reservation.dataset_id, decide)


def refund(spark: SparkSession, ledger: str, reservation: Reservation) -> bool:
    """Cancel a reservation whose attempt drew no noise and wrote no artifact (the caller checks the
    artifact); never after a commit nor after its attempt's ``drawn`` row. True if it was refunded."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState):
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

    def decide(state: DatasetState):
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
