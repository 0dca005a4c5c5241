"""The budget ledger's Delta table: its schema, creation, reads, and the insert-only write protocol.

The table holds each dataset's budget and every privacy release (the operations that decide what to write
are in :mod:`privsyn_spark.budget.ledger`).

Rows are only ever inserted (see :mod:`privsyn_spark.budget.ledger_state` for their kinds and what
they mean). ``seq`` numbers a dataset's rows 1, 2, 3, ... with no gaps and no duplicates; that is
what makes concurrent writers safe. Every write

1. reads the dataset's rows and decides, on that state, what to insert (or refuses: no budget, the
   budget would be exceeded, a reused run id asks something else);
2. inserts its row (:func:`append_row`) at ``seq = max + 1`` with an insert-only
   ``MERGE ... ON t.dataset_id = s.dataset_id AND t.seq >= s.seq WHEN NOT MATCHED THEN INSERT``.

Two writers that read the same state race for the same ``seq``. Delta's optimistic commit decides:
the loser either fails its commit with a concurrency exception or, when its MERGE reads the
winner's row, matches and inserts nothing; it then re-reads (now seeing the winner's row) and
decides again, a bounded number of times. So a dataset's spent rho never exceeds its budget, and
of two attempts of one run racing exactly one holds the reservation (the only one that may draw
noise). Creating the ledger is safe when several first writers do it at once.

Only a commit conflict is retried (and, while a ledger is being created, its log folder without a
first commit yet); any other error is raised at once: a log that is there but cannot be read is
:class:`LedgerDamaged` (never taken for a missing ledger), a location that cannot be written is
refused before Spark starts (:func:`~privsyn_spark.runtime.output_check.check_ledger_path`), and so
is a catalog name on Spark's in-memory catalog (forgotten, with the budget spent, when the session ends).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random,
)

from privsyn_spark.budget.ledger_state import DatasetState, fold
from privsyn_spark.budget.ledger_store import (
    check_exclusive,
    ledger_location,
    ledger_ready,
    local_rows,
    require_ledger,
)
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.delta_tables import create_if_not_exists, delta_frame, merge_insert
from privsyn_spark.runtime.locations import is_path, local_path
from privsyn_spark.runtime.output_check import check_ledger_path

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LEDGER_COLUMNS = ("dataset_id STRING, seq BIGINT, kind STRING, run_id STRING, rho DOUBLE, epsilon DOUBLE, "
                  "delta DOUBLE, attempt STRING, artifact STRING, artifact_sha256 STRING, fingerprint STRING, "
                  "recorded_at TIMESTAMP, privacy_unit STRING, max_rows_per_id BIGINT, partition_values STRING, "
                  "per_partition STRING, extra_delta DOUBLE")
"""The ledger table's schema (a DDL string). Columns are only ever added at the end: a ledger written
before one existed (a prefix of these columns) is read with it as None (a missing column is its
default: NULL, one row, unscoped, shared, no extra delta) and gets it on its next write
(:func:`ensure_ledger`)."""

_FIRST_COLUMNS = 12
"""The columns every ledger has had since the first version (without them a table is not a ledger)."""

_CONFLICT_MARKERS = ("Concurrent", "DELTA_CONCURRENT", "MetadataChanged", "ProtocolChanged",
                     "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED", "already exists",
                     "FileAlreadyExists")
_CREATING_MARKERS = ("DELTA_TABLE_NOT_FOUND", "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION")
"""What creating a ledger meets while another writer's creation is midway (its ``_delta_log`` folder is
there, its first commit not yet; or the commit landed between this writer's look and its own commit):
wait for that commit."""


class LedgerContention(RuntimeError):
    """Too many concurrent writers kept winning the race; nothing was written."""


class _CreationRace(Exception):
    """Another writer is creating the ledger (a commit conflict, or its log folder without a first commit
    yet): the one condition :func:`ensure_ledger` retries on, until its deadline."""


class _LostRace(Exception):
    """A write lost its ``seq`` to a concurrent writer (a commit conflict, or its MERGE matched the
    winner's row): the one condition :func:`append_row` retries on."""


def _is_creating(ledger: str, exc: BaseException) -> bool:
    """Whether ``exc`` says another writer's creation of the ledger is midway (:data:`_CREATING_MARKERS`;
    a local ledger's ``_delta_log`` is then a folder)."""
    folder = local_path(ledger)
    midway = folder is None or (folder / "_delta_log").is_dir()
    return midway and any(marker in str(exc) for marker in _CREATING_MARKERS)


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


def _ledger_schema() -> Any:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(LEDGER_COLUMNS)
    assert isinstance(schema, StructType)
    return schema


def ensure_ledger(spark: SparkSession, ledger: str, wait_seconds: float = 120.0, create: bool = True) -> None:
    """Create the (empty) ledger if it does not exist (``create``; otherwise :class:`LedgerMissing`);
    several first writers at once all succeed (a loser of the create race waits for the winner's first
    commit, then uses it). An older ledger gets this version's new columns (:data:`LEDGER_COLUMNS`)."""
    if not create:
        require_ledger(spark, ledger)
    location = ledger_location(ledger)

    def waiting(retry: RetryCallState) -> None:
        lost = retry.outcome.exception() if retry.outcome else None
        cause = lost.__cause__ if lost is not None else None
        log.info("ledger %s: concurrent creation (%s); waiting for it", location, type(cause).__name__)

    retrying = Retrying(retry=retry_if_exception_type(_CreationRace), stop=stop_after_delay(wait_seconds),
                        wait=wait_random(0.2, 0.5), before_sleep=waiting)
    try:
        retrying(_create_unless_ready, spark, ledger)
    except RetryError as exc:
        lost = exc.last_attempt.exception()
        said = str(lost.__cause__ if lost is not None else exc).strip().splitlines()[0][:300]
        raise UsageError(f"the budget ledger at {location} was still being created by another writer "
                         f"after {wait_seconds:g} s (Delta: {said}): if no writer is running, the location "
                         f"holds something else; remove its empty _delta_log folder or use a new "
                         f"ledger location") from None
    columns = list(delta_frame(spark, ledger_location(ledger)).columns)
    names = [c.split()[0] for c in LEDGER_COLUMNS.split(", ")]
    if columns != names[:len(columns)]:
        missing = [n for n in names if n not in columns]
        raise UsageError(f"{ledger} is not a budget ledger of this version (no columns {missing}); "
                         f"use a new ledger location")
    if len(columns) < len(names):
        _add_columns(spark, ledger, names[len(columns):])


def _create_unless_ready(spark: SparkSession, ledger: str) -> None:
    """Create the ledger unless it is there; :class:`_CreationRace` while another writer is creating it."""
    if ledger_ready(spark, ledger):
        return
    location = ledger_location(ledger)
    try:
        create_if_not_exists(spark, location, LEDGER_COLUMNS, "privsyn-spark privacy budget ledger (zCDP rho)")
    except Exception as exc:  # retried only while another writer is creating it
        if _is_conflict(exc) or _is_creating(ledger, exc):
            raise _CreationRace() from exc
        raise UsageError(f"could not create the budget ledger at {location}: "
                         f"{str(exc).strip().splitlines()[0][:300]}") from None
    log.info("created the budget ledger %s", location)


def _add_columns(spark: SparkSession, ledger: str, names: list[str]) -> None:
    """Add this version's new columns to an older ledger: an empty append with schema merging (one
    metadata commit; a concurrent writer doing the same is a conflict, then both see the columns)."""
    empty = spark.createDataFrame([], _ledger_schema()).write.format("delta").mode("append") \
        .option("mergeSchema", "true")
    try:
        empty.save(ledger_location(ledger)) if is_path(ledger) else empty.saveAsTable(ledger)
        log.info("ledger %s: added the columns %s of this version", ledger, names)
    except Exception as exc:  # a concurrent upgrade: fine if the columns are there now
        if not _is_conflict(exc) or set(names) - set(delta_frame(spark, ledger_location(ledger)).columns):
            raise


def read_ledger(spark: SparkSession, ledger: str, dataset_id: str | None = None) -> Any:
    """The ledger as a DataFrame (one dataset's rows when ``dataset_id`` is given)."""
    from pyspark.sql import functions as F

    df = delta_frame(spark, ledger_location(ledger))
    return df.where(F.col("dataset_id") == dataset_id) if dataset_id is not None else df


def dataset_state(spark: SparkSession, ledger: str, dataset_id: str) -> DatasetState:
    """The dataset's budget, spending and reservations (empty when the ledger does not exist)."""
    if not ledger_ready(spark, ledger):
        return DatasetState(dataset_id)
    return fold(dataset_id, [r.asDict() for r in read_ledger(spark, ledger, dataset_id).collect()])


def all_datasets(spark: SparkSession, ledger: str) -> list[DatasetState]:
    """Every dataset of the ledger, by id."""
    return _states([r.asDict() for r in read_ledger(spark, ledger).collect()] if ledger_ready(spark, ledger) else [])


def _states(rows: list[dict[str, Any]], dataset_id: str | None = None) -> list[DatasetState]:
    """The state of ``dataset_id`` (of every dataset, by id, when None) from ledger rows."""
    ids = [dataset_id] if dataset_id else sorted({r["dataset_id"] for r in rows})
    return [fold(d, [r for r in rows if r["dataset_id"] == d]) for d in ids]


def local_states(ledger: str, dataset_id: str | None = None) -> list[DatasetState] | None:
    """:func:`dataset_state` (a one-item list) or :func:`all_datasets` of a local path ledger, read
    without Spark (:func:`~privsyn_spark.budget.ledger_store.local_rows`); None when Spark must read it."""
    rows = local_rows(ledger)
    return None if rows is None else _states(rows, dataset_id)


Decision = Callable[[DatasetState], "dict | None"]


def append_row(spark: SparkSession, ledger: str, dataset_id: str, decide: Decision, max_attempts: int = 25,
            backoff_seconds: float = 0.05, create: bool = False) -> tuple[dict | None, DatasetState]:
    """Insert the row ``decide(state)`` returns at the next ``seq`` (see the module docstring).

    ``decide`` may raise (a refusal) or return None (nothing to write). Returns the inserted row (or
    None) and the state it was decided on. Only ``create`` (``budget set``) makes a missing ledger;
    a store without mutual exclusion is refused first (:func:`check_exclusive`).
    """
    check_ledger_path(ledger)
    check_exclusive(spark, ledger)
    ensure_ledger(spark, ledger, create=create)
    rng = random.Random()

    def backoff(retry: RetryCallState) -> float:
        return backoff_seconds * min(retry.attempt_number, 10) * (0.5 + rng.random())

    retrying = Retrying(retry=retry_if_exception_type(_LostRace), stop=stop_after_attempt(max_attempts), wait=backoff)
    try:
        for attempt in retrying:
            with attempt:
                written = _insert_once(spark, ledger, dataset_id, decide, attempt.retry_state.attempt_number)
    except RetryError:
        raise LedgerContention(f"could not write to ledger {ledger} for dataset {dataset_id!r}: "
                               f"{max_attempts} attempts lost to concurrent writers") from None
    return written


def _insert_once(spark: SparkSession, ledger: str, dataset_id: str, decide: Decision,
                 attempt: int) -> tuple[dict | None, DatasetState]:
    """One read-decide-insert of :func:`append_row`; :class:`_LostRace` when a concurrent writer took the seq."""
    state = dataset_state(spark, ledger, dataset_id)
    row = decide(state)
    if row is None:
        return None, state
    full: dict[str, Any] = {c.split()[0]: None for c in LEDGER_COLUMNS.split(", ")}
    full.update(row, dataset_id=dataset_id, seq=state.next_seq,
                recorded_at=datetime.now(timezone.utc).replace(tzinfo=None))
    source = spark.createDataFrame([tuple(full.values())], LEDGER_COLUMNS)
    try:
        metrics = merge_insert(spark, ledger_location(ledger), source, "t.dataset_id = s.dataset_id AND t.seq >= s.seq")
        inserted = _inserted_rows(metrics)
    except Exception as exc:
        if not _is_conflict(exc):
            raise
        log.info("ledger %s: a write for dataset %s lost a commit race (attempt %d): %s",
                 ledger, dataset_id, attempt, type(exc).__name__)
        raise _LostRace() from exc
    if inserted is None:  # no metrics from MERGE: look for our row instead
        from pyspark.sql import functions as F

        inserted = (read_ledger(spark, ledger, dataset_id)
                    .where((F.col("seq") == full["seq"]) & (F.col("kind") == full["kind"])
                           & F.col("attempt").eqNullSafe(full["attempt"])).count())
    if inserted != 1:
        raise _LostRace()
    return full, state


def _inserted_rows(metrics: Any) -> int | None:
    """``num_inserted_rows`` of a MERGE's result DataFrame (None if this Delta version returns none)."""
    if metrics is None or "num_inserted_rows" not in metrics.columns:
        return None
    return int(metrics.first()["num_inserted_rows"])
