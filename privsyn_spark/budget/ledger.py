"""The budget ledger: a Delta table holding each dataset's budget and every privacy release.

Rows are only ever inserted (see :mod:`privsyn_spark.budget.ledger_state` for their kinds and what
they mean). ``seq`` numbers a dataset's rows 1, 2, 3, ... with no gaps and no duplicates; that is
what makes concurrent writers safe. Every write

1. reads the dataset's rows and decides, on that state, what to insert (or refuses: no budget, the
   budget would be exceeded, a reused run id asks something else);
2. inserts its row at ``seq = max + 1`` with an insert-only
   ``MERGE ... ON t.dataset_id = s.dataset_id AND t.seq >= s.seq WHEN NOT MATCHED THEN INSERT``.

Two writers that read the same state race for the same ``seq``. Delta's optimistic commit decides:
the loser either fails its commit with a concurrency exception or, when its MERGE reads the
winner's row, matches and inserts nothing; it then re-reads (now seeing the winner's row) and
decides again, a bounded number of times. So a dataset's spent rho never exceeds its budget, and
of two attempts of one run racing exactly one holds the reservation (the only one that may draw
noise). Creating the ledger is safe when several first writers do it at once.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.ledger_state import (
    BUDGET,
    COMMIT,
    REFUND,
    RESERVE,
    Budget,
    DatasetState,
    RunReservation,
    check_budget,
    fingerprint_mismatch,
    fold,
)
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.accounting import RHO_TOLERANCE
from privsyn_spark.runtime.locations import is_path

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LEDGER_COLUMNS = ("dataset_id STRING, seq BIGINT, kind STRING, run_id STRING, rho DOUBLE, epsilon DOUBLE, "
                  "delta DOUBLE, attempt STRING, artifact STRING, artifact_sha256 STRING, fingerprint STRING, "
                  "recorded_at TIMESTAMP")
"""The ledger table's schema (a DDL string)."""

_CONFLICT_MARKERS = ("Concurrent", "DELTA_CONCURRENT", "MetadataChanged", "ProtocolChanged",
                     "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED", "already exists",
                     "FileAlreadyExists")


class BudgetExhausted(BudgetRefused):
    """The dataset's cumulative rho plus the run's own would exceed its total budget."""

    def __init__(self, dataset_id: str, spent: float, asked: float, budget: float, run_id: str | None = None):
        self.dataset_id, self.spent, self.asked, self.budget, self.run_id = dataset_id, spent, asked, budget, run_id
        who = f"run {run_id!r} " if run_id else ""
        super().__init__(f"privacy budget of dataset {dataset_id!r} exhausted: {who}asks rho={asked:.6g}, "
                         f"already spent rho={spent:.6g} of budget rho={budget:.6g} "
                         f"(left {max(budget - spent, 0.0):.6g})")


class NoBudget(BudgetRefused):
    """The dataset has no budget in the ledger: ``privsyn-spark budget set`` first."""


class RunMismatch(UsageError):
    """A run id that already holds a reservation is asked for different epsilon/delta/schema/input."""


class LedgerContention(RuntimeError):
    """Too many concurrent writers kept winning the race; nothing was written."""


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


def _location(ledger: str) -> str:
    """An absolute path for a local path ledger; the URI or catalog name itself otherwise."""
    if is_path(ledger) and "://" not in ledger:
        return str(Path(ledger).expanduser().absolute())
    return ledger


def _is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a Delta commit conflict (so re-reading and retrying is right)."""
    try:
        from delta.exceptions import DeltaConcurrentModificationException

        if isinstance(exc, DeltaConcurrentModificationException):
            return True
    except ImportError:  # pragma: no cover - delta-spark is a dependency
        pass
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in _CONFLICT_MARKERS)


def _delta_table(spark: SparkSession, ledger: str):
    from delta.tables import DeltaTable

    location = _location(ledger)
    return DeltaTable.forPath(spark, location) if is_path(ledger) else DeltaTable.forName(spark, location)


def _ready(spark: SparkSession, ledger: str) -> bool:
    """Whether the ledger exists with at least its first commit."""
    from delta.tables import DeltaTable

    try:
        if is_path(ledger):
            return bool(DeltaTable.isDeltaTable(spark, _location(ledger)))
        return bool(spark.catalog.tableExists(ledger)) and _delta_table(spark, ledger) is not None
    except Exception:  # noqa: BLE001 - a folder without a first commit yet, or a concurrent create
        return False


def _ledger_schema():
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(LEDGER_COLUMNS)
    assert isinstance(schema, StructType)
    return schema


def ensure_ledger(spark: SparkSession, ledger: str, wait_seconds: float = 120.0) -> None:
    """Create the (empty) ledger if it does not exist; several first writers at once all succeed
    (a loser of the create race waits for the winner's first commit, then uses it)."""
    from delta.tables import DeltaTable

    deadline = time.monotonic() + wait_seconds
    rng = random.Random()
    while not _ready(spark, ledger):
        location = _location(ledger)
        builder = DeltaTable.createIfNotExists(spark)
        builder = builder.location(location) if is_path(ledger) else builder.tableName(location)
        try:
            builder.addColumns(_ledger_schema()).comment(
                "privsyn-spark privacy budget ledger (zCDP rho)").execute()
            log.info("created the budget ledger %s", location)
            break
        except Exception as exc:  # noqa: BLE001 - another writer is creating it: wait for its commit
            if time.monotonic() > deadline:
                raise
            log.info("ledger %s: concurrent creation (%s); waiting for it", location, type(exc).__name__)
            time.sleep(0.2 + 0.3 * rng.random())
    columns = set(_delta_table(spark, ledger).toDF().columns)
    missing = [c.split()[0] for c in LEDGER_COLUMNS.split(", ") if c.split()[0] not in columns]
    if missing:
        raise UsageError(f"{ledger} is not a budget ledger of this version (no columns {missing}); "
                         f"use a new ledger location")


def read_ledger(spark: SparkSession, ledger: str, dataset_id: str | None = None):
    """The ledger as a DataFrame (one dataset's rows when ``dataset_id`` is given)."""
    from pyspark.sql import functions as F

    df = _delta_table(spark, ledger).toDF()
    return df.where(F.col("dataset_id") == dataset_id) if dataset_id is not None else df


def dataset_state(spark: SparkSession, ledger: str, dataset_id: str) -> DatasetState:
    """The dataset's budget, spending and reservations (empty when the ledger does not exist)."""
    if not _ready(spark, ledger):
        return DatasetState(dataset_id)
    return fold(dataset_id, [r.asDict() for r in read_ledger(spark, ledger, dataset_id).collect()])


def all_datasets(spark: SparkSession, ledger: str) -> list[DatasetState]:
    """Every dataset of the ledger, by id."""
    rows = [r.asDict() for r in read_ledger(spark, ledger).collect()] if _ready(spark, ledger) else []
    ids = sorted({r["dataset_id"] for r in rows})
    return [fold(d, [r for r in rows if r["dataset_id"] == d]) for d in ids]


Decision = Callable[[DatasetState], "dict | None"]


def _append(spark: SparkSession, ledger: str, dataset_id: str, decide: Decision, max_attempts: int = 25,
            backoff_seconds: float = 0.05) -> tuple[dict | None, DatasetState]:
    """Insert the row ``decide(state)`` returns at the next ``seq`` (see the module docstring).

    ``decide`` may raise (a refusal) or return None (nothing to write). Returns the inserted row (or
    None) and the state it was decided on.
    """
    ensure_ledger(spark, ledger)
    rng = random.Random()
    for attempt in range(1, max_attempts + 1):
        state = dataset_state(spark, ledger, dataset_id)
        row = decide(state)
        if row is None:
            return None, state
        full: dict[str, Any] = {c.split()[0]: None for c in LEDGER_COLUMNS.split(", ")}
        full.update(row, dataset_id=dataset_id, seq=state.next_seq,
                    recorded_at=datetime.now(timezone.utc).replace(tzinfo=None))
        source = spark.createDataFrame([tuple(full.values())], LEDGER_COLUMNS)
        try:
            metrics = (_delta_table(spark, ledger).alias("t")
                       .merge(source.alias("s"), "t.dataset_id = s.dataset_id AND t.seq >= s.seq")
                       .whenNotMatchedInsertAll().execute())
            inserted = _inserted_rows(metrics)
        except Exception as exc:
            if not _is_conflict(exc):
                raise
            log.info("ledger %s: a write for dataset %s lost a commit race (attempt %d): %s",
                     ledger, dataset_id, attempt, type(exc).__name__)
            inserted = 0
        if inserted is None:  # no metrics from MERGE: look for our row instead
            from pyspark.sql import functions as F

            inserted = (read_ledger(spark, ledger, dataset_id)
                        .where((F.col("seq") == full["seq"]) & (F.col("kind") == full["kind"])
                               & F.col("attempt").eqNullSafe(full["attempt"])).count())
        if inserted == 1:
            return full, state
        time.sleep(backoff_seconds * min(attempt, 10) * (0.5 + rng.random()))
    raise LedgerContention(f"could not write to ledger {ledger} for dataset {dataset_id!r}: "
                           f"{max_attempts} attempts lost to concurrent writers")


def _inserted_rows(metrics) -> int | None:
    """``num_inserted_rows`` of a MERGE's result DataFrame (None if this Delta version returns none)."""
    if metrics is None or "num_inserted_rows" not in metrics.columns:
        return None
    return int(metrics.first()["num_inserted_rows"])


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

    row, _ = _append(spark, ledger, dataset_id, decide)
    if row is not None:
        log.info("ledger %s: dataset %s budget epsilon=%g at delta=%g (rho=%.6g)", ledger, dataset_id,
                 budget.epsilon, budget.delta, budget.rho)
    return budget


def reserve(spark: SparkSession, ledger: str, dataset_id: str, run_id: str, *, rho: float, epsilon: float, delta: float,
            fingerprint: dict, artifact: str, attempt: str | None = None,
            recharge_of: int | None = None) -> Reservation:
    """Charge ``rho`` to ``dataset_id`` for ``run_id`` before any noise is drawn, or find its reservation.

    A run id with a reservation gets it back uncharged (``charged=False``: the caller must reuse its
    artifact and draw nothing); asking it with another fingerprint raises :class:`RunMismatch`.
    ``recharge_of=seq`` charges a fresh reservation in place of the run's reservation ``seq`` (its
    artifact was lost; the lost release stays charged). Raises :class:`NoBudget` without a budget,
    :class:`BudgetExhausted` when spent + ``rho`` would exceed it.
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
        if state.spent_rho + rho > state.budget.rho * (1.0 + RHO_TOLERANCE):
            raise BudgetExhausted(dataset_id, state.spent_rho, rho, state.budget.rho, run_id)
        return {"kind": RESERVE, "run_id": run_id, "rho": float(rho), "epsilon": float(epsilon),
                "delta": float(delta), "attempt": attempt, "artifact": artifact,
                "fingerprint": json.dumps(fingerprint, sort_keys=True)}

    row, state = _append(spark, ledger, dataset_id, decide)
    if row is None:
        held = found[0]
        log.info("run %s holds reservation #%d of dataset %s (%s): nothing charged", run_id, held.seq,
                 dataset_id, held.status)
        return Reservation(dataset_id, held, charged=False, spent_before=state.spent_rho - held.rho)
    held = RunReservation(run_id, row["seq"], attempt, float(rho), float(epsilon), float(delta), fingerprint,
                          artifact, None, False, row["recorded_at"])
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

    _append(spark, ledger, reservation.dataset_id, decide)


def refund(spark: SparkSession, ledger: str, reservation: Reservation) -> bool:
    """Cancel a reservation whose attempt drew no noise and wrote no artifact (the caller checks
    both); never after a commit. True if it was refunded."""
    attempt = reservation.held.attempt

    def decide(state: DatasetState):
        mine = state.of_attempt(attempt)
        if mine is None or mine.refunded or mine.artifact_sha256 is not None:
            return None
        return {"kind": REFUND, "run_id": reservation.run_id, "attempt": attempt, "rho": mine.rho}

    row, _ = _append(spark, ledger, reservation.dataset_id, decide)
    if row is not None:
        log.info("run %s failed before drawing noise: reservation #%d of dataset %s refunded",
                 reservation.run_id, reservation.seq, reservation.dataset_id)
    return row is not None
