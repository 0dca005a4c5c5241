"""The budget ledger: a Delta table of every privacy release per dataset, shared by all runs.

One row per reservation: ``(dataset_id, seq, run_id, step, rho, recorded_at)``. ``seq`` numbers a
dataset's reservations 1, 2, 3, ... with no gaps and no duplicates; that is what makes concurrent
runs safe. A reservation

1. reads the ledger and computes, for its dataset, the next ``seq`` (max + 1) and the rho spent
   (zCDP composes additively: Bun-Steinke 2016, Lemma 2.3);
2. refuses with :class:`BudgetExhausted` when spent + own rho would exceed the dataset's budget;
3. otherwise inserts its row with an insert-only ``MERGE ... ON t.dataset_id = s.dataset_id AND
   (t.seq >= s.seq OR t.run_id = s.run_id AND t.step = s.step) WHEN NOT MATCHED THEN INSERT``.

Two reservations that read the same state race for the same ``seq``. Delta's optimistic commit
decides: the loser either fails its commit with a concurrency exception (its MERGE read files the
winner added) or, when its MERGE reads the winner's row, matches and inserts nothing. Both are seen
here, and the loser re-reads the ledger (now counting the winner's rho) and tries again, a bounded
number of times. So the ledger total of a dataset never exceeds its budget.

Reserving is idempotent: a run id that already holds a reservation of the dataset for the step is
not charged again (an Airflow retry, or two attempts racing, spend once). Reservations are never
refunded: a run that fails after reserving may already have drawn noise.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from privsyn_spark.errors import BudgetRefused
from privsyn_spark.privacy.accounting import RHO_TOLERANCE
from privsyn_spark.runtime.tables import is_path

log = logging.getLogger(__name__)

MEASURE_STEP = "measure"
"""The only step of the pipeline that spends privacy budget."""

LEDGER_COLUMNS = "dataset_id STRING, seq BIGINT, run_id STRING, step STRING, rho DOUBLE, recorded_at TIMESTAMP"
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


class LedgerContention(RuntimeError):
    """Too many concurrent reservations kept winning the race; nothing was reserved."""


@dataclass(frozen=True)
class Reservation:
    """A row of the ledger held by a run (``charged`` is False when the run already held it)."""

    dataset_id: str
    run_id: str
    step: str
    rho: float
    seq: int
    spent_before: float
    charged: bool


def _location(ledger: str) -> str:
    """An absolute path for a path ledger; the name itself for a catalog table."""
    if is_path(ledger) and "://" not in ledger:
        return str(Path(ledger).expanduser().absolute())
    return ledger


def _is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a Delta commit conflict (so re-reading and retrying is right)."""
    try:
        from delta.exceptions import DeltaConcurrentModificationException
        from delta.exceptions.base import (ConcurrentAppendException, ConcurrentDeleteReadException,
                                           ConcurrentTransactionException, ConcurrentWriteException,
                                           MetadataChangedException, ProtocolChangedException)

        if isinstance(exc, (DeltaConcurrentModificationException, ConcurrentAppendException,
                            ConcurrentDeleteReadException, ConcurrentTransactionException,
                            ConcurrentWriteException, MetadataChangedException, ProtocolChangedException)):
            return True
    except ImportError:  # pragma: no cover - delta-spark is a dependency
        pass
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in _CONFLICT_MARKERS)


def _delta_table(spark, ledger: str):
    from delta.tables import DeltaTable

    location = _location(ledger)
    if is_path(ledger):
        return DeltaTable.forPath(spark, location)
    return DeltaTable.forName(spark, location)


def _exists(spark, ledger: str) -> bool:
    from delta.tables import DeltaTable

    location = _location(ledger)
    if is_path(ledger):
        return DeltaTable.isDeltaTable(spark, location)
    return bool(spark.catalog.tableExists(location))


def ensure_ledger(spark, ledger: str, wait_seconds: float = 60.0) -> None:
    """Create the (empty) ledger table if it does not exist; safe when several runs create it at once."""
    from delta.tables import DeltaTable
    from pyspark.sql.types import StructType

    if _ready(spark, ledger):
        return
    location = _location(ledger)
    builder = DeltaTable.createIfNotExists(spark)
    builder = builder.location(location) if is_path(ledger) else builder.tableName(location)
    builder = builder.addColumns(StructType.fromDDL(LEDGER_COLUMNS)).comment(
        "privsyn-spark privacy budget ledger (zCDP rho)")
    try:
        builder.execute()
        log.info("created the budget ledger %s", location)
    except Exception:  # another run may be creating it right now: wait for its first commit
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            if _ready(spark, ledger):
                return
            time.sleep(0.2)
        raise


def _ready(spark, ledger: str) -> bool:
    """Whether the ledger exists with at least its first commit."""
    try:
        return _exists(spark, ledger) and _delta_table(spark, ledger) is not None
    except Exception:  # noqa: BLE001 - a folder without a first commit yet, or a concurrent create
        return False


def read_ledger(spark, ledger: str, dataset_id: str | None = None):
    """The ledger as a DataFrame (one dataset's rows when ``dataset_id`` is given)."""
    from pyspark.sql import functions as F

    df = _delta_table(spark, ledger).toDF()
    return df.where(F.col("dataset_id") == dataset_id) if dataset_id is not None else df


def spent_rho(spark, ledger: str, dataset_id: str) -> float:
    """Total rho the dataset's reservations hold (0 when the ledger does not exist)."""
    if not _exists(spark, ledger):
        return 0.0
    return float(sum(r["rho"] for r in read_ledger(spark, ledger, dataset_id).select("rho").collect()))


def _over_budget(spent: float, rho: float, budget: float | None) -> bool:
    return budget is not None and spent + rho > budget * (1.0 + RHO_TOLERANCE)


def reserve(spark, ledger: str, dataset_id: str, run_id: str, rho: float,
            total_rho_budget: float | None, step: str = MEASURE_STEP, max_attempts: int = 25,
            backoff_seconds: float = 0.05) -> Reservation:
    """Reserve ``rho`` of ``dataset_id``'s budget for ``run_id`` (before the run draws any noise).

    Raises :class:`BudgetExhausted` when the dataset's recorded rho plus ``rho`` would exceed
    ``total_rho_budget`` (None: no limit, the release is only recorded). A run id already holding
    a reservation for (dataset, step) gets it back uncharged; asking it for more rho than it holds
    is a ``ValueError``. Concurrent reservations are serialised by Delta's commit (see the module
    docstring); after ``max_attempts`` lost races :class:`LedgerContention` is raised.
    """
    from pyspark.sql import functions as F

    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    if total_rho_budget is not None and not total_rho_budget > 0:
        raise ValueError(f"total_rho_budget must be > 0, got {total_rho_budget}")
    ensure_ledger(spark, ledger)
    rng = random.Random()
    for attempt in range(1, max_attempts + 1):
        rows = (read_ledger(spark, ledger, dataset_id)
                .select("seq", "run_id", "step", "rho").collect())
        spent = float(sum(r["rho"] for r in rows))
        mine = [r for r in rows if r["run_id"] == run_id and r["step"] == step]
        if mine:
            held = mine[0]
            if rho > held["rho"] * (1.0 + RHO_TOLERANCE):
                raise ValueError(f"run {run_id!r} already reserved rho={held['rho']:.6g} of dataset "
                                 f"{dataset_id!r} for {step}; it cannot ask for rho={rho:.6g} now "
                                 "(use a new run id)")
            log.info("run %s already holds reservation #%d of dataset %s (rho=%.6g): nothing charged",
                     run_id, held["seq"], dataset_id, held["rho"])
            return Reservation(dataset_id, run_id, step, float(held["rho"]), int(held["seq"]),
                               spent - float(held["rho"]), charged=False)
        if _over_budget(spent, rho, total_rho_budget):
            raise BudgetExhausted(dataset_id, spent, rho, float(total_rho_budget), run_id)
        seq = max((int(r["seq"]) for r in rows), default=0) + 1
        source = spark.createDataFrame(
            [(dataset_id, seq, run_id, step, float(rho), datetime.now(timezone.utc).replace(tzinfo=None))],
            LEDGER_COLUMNS)
        try:
            metrics = (_delta_table(spark, ledger).alias("t")
                       .merge(source.alias("s"),
                              "t.dataset_id = s.dataset_id AND "
                              "(t.seq >= s.seq OR (t.run_id = s.run_id AND t.step = s.step))")
                       .whenNotMatchedInsertAll()
                       .execute())
            inserted = _inserted_rows(metrics)
        except Exception as exc:
            if not _is_conflict(exc):
                raise
            log.info("ledger %s: reservation of dataset %s by run %s lost a commit race (attempt %d): %s",
                     ledger, dataset_id, run_id, attempt, type(exc).__name__)
            inserted = 0
        if inserted is None:  # no metrics from MERGE: look for our row instead
            inserted = (read_ledger(spark, ledger, dataset_id)
                        .where((F.col("seq") == seq) & (F.col("run_id") == run_id) & (F.col("step") == step))
                        .count())
        if inserted == 1:
            log.info("run %s reserved rho=%.6g of dataset %s (reservation #%d; spent before %.6g, budget %s)",
                     run_id, rho, dataset_id, seq, spent, total_rho_budget)
            return Reservation(dataset_id, run_id, step, float(rho), seq, spent, charged=True)
        time.sleep(backoff_seconds * min(attempt, 10) * (0.5 + rng.random()))
    raise LedgerContention(f"could not reserve rho for run {run_id!r} on dataset {dataset_id!r} in ledger "
                           f"{ledger}: {max_attempts} attempts lost to concurrent reservations")


def _inserted_rows(metrics) -> int | None:
    """``num_inserted_rows`` of a MERGE's result DataFrame (None if this Delta version returns none)."""
    if metrics is None or "num_inserted_rows" not in metrics.columns:
        return None
    return int(metrics.first()["num_inserted_rows"])


def reserve_for_run(spark, config) -> Reservation | None:
    """Reserve the run's rho in its budget ledger before measuring; None when the run has no ledger.

    ``config`` is a :class:`privsyn_spark.pipeline.RunConfig`: the ledger is ``config.ledger``, the
    dataset ``config.dataset_id`` (default: ``config.input``), the run's rho comes from
    (``config.epsilon``, ``config.delta``) exactly as the privacy core computes it, and the
    dataset's budget is ``config.dataset_rho_budget`` (None: record only). Call it in the measure
    step after the reuse check (a run whose measurements exist spends nothing) and before any
    count is taken; :class:`BudgetExhausted` then stops the run before it reads the data.
    """
    if not config.ledger:
        return None
    from privsyn_spark.privacy.release import resolve_budget

    rho, _, _ = resolve_budget(config.epsilon, config.delta, None)
    return reserve(spark, config.ledger, dataset_id_of(config), config.run_id, rho,
                   config.dataset_rho_budget, step=MEASURE_STEP)


def dataset_id_of(config) -> str:
    """The ledger key of a run's dataset: ``config.dataset_id``, else its input table."""
    return config.dataset_id or config.input
