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
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.ledger_state import DatasetState, NoBudget, fold
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.locations import is_path

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

EXCLUSIVE_OVERRIDE = "spark.privsyn.ledger.singleDriver"
"""Spark conf an operator sets to ``true`` to state that only one driver at a time ever writes a ledger
whose store cannot give mutual exclusion (S3 without a multi-writer LogStore): see :func:`check_exclusive`."""

_SINGLE_DRIVER_SCHEMES = ("s3", "s3a", "s3n")
_EXCLUSIVE: set[str] = set()  # ledgers found to give mutual exclusion in this process

_CONFLICT_MARKERS = ("Concurrent", "DELTA_CONCURRENT", "MetadataChanged", "ProtocolChanged",
                     "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED", "already exists",
                     "FileAlreadyExists")


class LedgerContention(RuntimeError):
    """Too many concurrent writers kept winning the race; nothing was written."""


class LedgerMissing(NoBudget):
    """No ledger at the given location: only ``budget set`` creates one (a mistyped ``--ledger`` must
    not silently start an empty ledger)."""


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


def _delta_table(spark: SparkSession, ledger: str) -> Any:
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


def _ledger_schema() -> Any:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(LEDGER_COLUMNS)
    assert isinstance(schema, StructType)
    return schema


def ensure_ledger(spark: SparkSession, ledger: str, wait_seconds: float = 120.0, create: bool = True) -> None:
    """Create the (empty) ledger if it does not exist (``create``; otherwise :class:`LedgerMissing`);
    several first writers at once all succeed (a loser of the create race waits for the winner's first
    commit, then uses it). An older ledger gets this version's new columns (:data:`LEDGER_COLUMNS`)."""
    from delta.tables import DeltaTable

    deadline = time.monotonic() + wait_seconds
    rng = random.Random()
    if not create:
        require_ledger(spark, ledger)
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
    columns = list(_delta_table(spark, ledger).toDF().columns)
    names = [c.split()[0] for c in LEDGER_COLUMNS.split(", ")]
    if columns != names[:len(columns)]:
        missing = [n for n in names if n not in columns]
        raise UsageError(f"{ledger} is not a budget ledger of this version (no columns {missing}); "
                         f"use a new ledger location")
    if len(columns) < len(names):
        _add_columns(spark, ledger, names[len(columns):])


def require_ledger(spark: SparkSession, ledger: str) -> None:
    """:class:`LedgerMissing` unless a ledger exists at ``ledger`` (a mistyped path creates nothing)."""
    if not _ready(spark, ledger):
        raise LedgerMissing(f"no budget ledger at {ledger}: check --ledger, or create it by setting the dataset's "
                            f"budget there (`privsyn-spark budget set --ledger {ledger} --dataset ID --epsilon E "
                            f"--delta D`)")


def _add_columns(spark: SparkSession, ledger: str, names: list[str]) -> None:
    """Add this version's new columns to an older ledger: an empty append with schema merging (one
    metadata commit; a concurrent writer doing the same is a conflict, then both see the columns)."""
    empty = spark.createDataFrame([], _ledger_schema()).write.format("delta").mode("append") \
        .option("mergeSchema", "true")
    try:
        empty.save(_location(ledger)) if is_path(ledger) else empty.saveAsTable(ledger)
        log.info("ledger %s: added the columns %s of this version", ledger, names)
    except Exception as exc:  # noqa: BLE001 - a concurrent upgrade: fine if the columns are there now
        if not _is_conflict(exc) or set(names) - set(_delta_table(spark, ledger).toDF().columns):
            raise


def check_exclusive(spark: SparkSession, ledger: str) -> None:
    """Refuse (:class:`UsageError`) a ledger whose store cannot give two writers mutual exclusion
    (:func:`exclusion_problem`); the operator's :data:`EXCLUSIVE_OVERRIDE` turns it into a warning."""
    if ledger in _EXCLUSIVE:
        return
    location = _location(ledger) if is_path(ledger) else _table_location(spark, ledger)
    problem = exclusion_problem(location, lambda key: spark.conf.get(key, None))
    if problem is None:
        _EXCLUSIVE.add(ledger)
        return
    if str(spark.conf.get(EXCLUSIVE_OVERRIDE, "false")).lower() == "true":
        log.warning("ledger %s: %s; %s=true says only one driver writes it at a time", ledger, problem,
                    EXCLUSIVE_OVERRIDE)
        return
    raise UsageError(f"ledger {ledger}: {problem} (two runs could both spend the last of a budget); configure a "
                     f"multi-writer LogStore, or, if only one driver ever writes this ledger at a time, "
                     f"--conf {EXCLUSIVE_OVERRIDE}=true")


def exclusion_problem(location: str, conf: Callable[[str], str | None]) -> str | None:
    """Why the store at ``location`` gives concurrent writers no mutual exclusion, or None.

    The ledger's safety rests on Delta's commit: two writers of one ``seq`` never both succeed. On
    S3 (``s3``/``s3a``/``s3n``) that holds only with a multi-writer LogStore (Delta's default S3 one
    is single-driver: two clusters can both "win"), i.e. ``spark.delta.logStore.<scheme>.impl`` (or
    ``spark.delta.logStore.class``) set to one such as ``io.delta.storage.S3DynamoDBLogStore``. HDFS,
    ABFS, GCS and local file systems give mutual exclusion with Delta's defaults (a local ledger is
    tested with two processes racing: ``tests/budget/test_ledger_processes.py``)."""
    scheme = location.split("://", 1)[0].lower() if "://" in location else "file"
    if scheme not in _SINGLE_DRIVER_SCHEMES:
        return None
    impl = conf(f"spark.delta.logStore.{scheme}.impl") or conf("spark.delta.logStore.class")
    if impl and "SingleDriver" not in impl:
        return None
    return (f"{scheme}:// gives concurrent writers no mutual exclusion with "
            f"{'the LogStore ' + impl if impl else 'Delta default LogStore'} "
            f"(set spark.delta.logStore.{scheme}.impl=io.delta.storage.S3DynamoDBLogStore)")


def _table_location(spark: SparkSession, name: str) -> str:
    """A catalog table's storage location (empty when the catalog does not say)."""
    try:
        row = spark.sql(f"DESCRIBE DETAIL {name}").first()
        return str(row["location"] or "") if row is not None else ""
    except Exception:  # noqa: BLE001 - not a Delta table yet, or a catalog without DESCRIBE DETAIL
        return ""


def read_ledger(spark: SparkSession, ledger: str, dataset_id: str | None = None) -> Any:
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


def append_row(spark: SparkSession, ledger: str, dataset_id: str, decide: Decision, max_attempts: int = 25,
            backoff_seconds: float = 0.05, create: bool = False) -> tuple[dict | None, DatasetState]:
    """Insert the row ``decide(state)`` returns at the next ``seq`` (see the module docstring).

    ``decide`` may raise (a refusal) or return None (nothing to write). Returns the inserted row (or
    None) and the state it was decided on. Only ``create`` (``budget set``) makes a missing ledger;
    a store without mutual exclusion is refused first (:func:`check_exclusive`).
    """
    check_exclusive(spark, ledger)
    ensure_ledger(spark, ledger, create=create)
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


def _inserted_rows(metrics: Any) -> int | None:
    """``num_inserted_rows`` of a MERGE's result DataFrame (None if this Delta version returns none)."""
    if metrics is None or "num_inserted_rows" not in metrics.columns:
        return None
    return int(metrics.first()["num_inserted_rows"])
