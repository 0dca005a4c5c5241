"""Where the budget ledger is and whether it can be used: the session (Delta Lake, a persistent catalog),
the store (mutual exclusion of writers), whether the ledger is there, or damaged.

A ledger whose Delta log is there but cannot be read is :class:`LedgerDamaged` (exit 3, at once): never
taken for a missing one (whose advice, ``budget set``, would start a new ledger that forgot every budget
spent) nor for a concurrent writer. A local path ledger is read without Spark for ``budget show`` and
``budget check`` (:func:`local_rows`, through delta-rs).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.dataset_budget import NoBudget
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.runtime import delta_rs
from privsyn_spark.runtime.delta_tables import delta_frame, is_delta_table
from privsyn_spark.runtime.locations import is_path, local_path
from privsyn_spark.runtime.preflight import check_delta

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

EXCLUSIVE_OVERRIDE = "spark.privsyn.ledger.singleDriver"
"""Spark conf an operator sets to ``true`` to state that only one driver at a time ever writes a ledger
whose store cannot give mutual exclusion (S3 without a multi-writer LogStore): see :func:`check_exclusive`."""

_SINGLE_DRIVER_SCHEMES = ("s3", "s3a", "s3n")
_EXCLUSIVE: set[str] = set()  # ledgers found to give mutual exclusion in this process


class LedgerMissing(NoBudget):
    """No ledger at the given location: only ``budget set`` creates one (a mistyped ``--ledger`` must
    not silently start an empty ledger)."""


class LedgerDamaged(BudgetRefused):
    """A ledger's Delta log is there but cannot be read (versions missing, an unreadable file): it must
    be restored, never recreated (a new ledger would forget the budget spent)."""

    def __init__(self, ledger: str, reason: str):
        super().__init__(f"the ledger at {ledger_location(ledger)} is damaged ({reason}): restore it (from a "
                         f"backup or the storage's versioning); never replace it by a new one, which would forget "
                         f"every budget spent")


def ledger_location(ledger: str) -> str:
    """An absolute path for a local path ledger; the URI or catalog name itself otherwise."""
    if is_path(ledger) and "://" not in ledger:
        return str(Path(ledger).expanduser().absolute())
    return ledger


def check_ledger_session(spark: SparkSession, ledger: str) -> None:
    """Refuse (UsageError, one line) a session the ledger cannot be kept on: one without Delta Lake (the
    preflight's check), or a catalog name on Spark's in-memory catalog, which forgets the table when
    the session ends (the next run would find no ledger, or recreate one that forgot the budget spent)."""
    check_delta(spark, f"the budget ledger {ledger}")
    if is_path(ledger) or (ledger.count(".") == 2 and not ledger.startswith("spark_catalog.")):
        return  # a path, or a table of another catalog than the session's
    try:
        implementation = spark.conf.get("spark.sql.catalogImplementation")  # its default when unset
    except Exception:  # noqa: BLE001 - a server that does not say: it is not refused
        return
    if implementation == "in-memory":
        raise UsageError(f"--ledger {ledger}: a table name in Spark's in-memory catalog (spark.sql."
                         f"catalogImplementation=in-memory) is forgotten when the session ends, with the budget "
                         f"spent; give a path (e.g. --ledger runs/ledger) or a table of a persistent catalog "
                         f"(Hive metastore, Unity Catalog)")


def ledger_ready(spark: SparkSession, ledger: str) -> bool:
    """Whether the ledger exists with at least its first commit (False: nothing there yet, or a log
    folder without a first commit); :class:`LedgerDamaged` when a log is there that cannot be read."""
    check_ledger_session(spark, ledger)
    try:
        if is_path(ledger):
            if not is_delta_table(spark, ledger_location(ledger)):
                return False
        elif not spark.catalog.tableExists(ledger):
            return False
        delta_frame(spark, ledger_location(ledger)).schema  # noqa: B018 - the log listed anew (not a cached snapshot)
        return True
    except Exception as exc:  # classified: damaged, or raised as it is
        reason = _damage(ledger, exc)
        if reason is None:
            raise
        raise LedgerDamaged(ledger, reason) from None


def _damage(ledger: str, exc: BaseException) -> str | None:
    """What is wrong with a ledger whose log Spark could not read (``exc``), or None when ``exc`` does not
    say the log is damaged (a permission or network error, raised as it is)."""
    folder = local_path(ledger)
    gaps = delta_rs.missing_versions(folder) if folder is not None else None
    if gaps:
        return gaps
    text = f"{type(exc).__name__}: {exc}"
    error_class = re.search(r"\[(DELTA_[A-Z_]+)]", text)
    if error_class:
        return f"Delta's error {error_class.group(1)}"
    if folder is not None and delta_rs.has_log(folder):
        return f"its log cannot be read: {text.splitlines()[0][:200]}"
    return None


def require_ledger(spark: SparkSession, ledger: str) -> None:
    """:class:`LedgerMissing` unless a ledger exists at ``ledger`` (a mistyped path creates nothing)."""
    if not ledger_ready(spark, ledger):
        raise missing(ledger)


def missing(ledger: str) -> LedgerMissing:
    """The refusal of a ledger location where there is none."""
    return LedgerMissing(f"no budget ledger at {ledger}: check --ledger, or create it by setting the dataset's "
                         f"budget there (`privsyn-spark budget set --ledger {ledger} --dataset-id ID --epsilon E "
                         f"--delta D`)")


def check_exclusive(spark: SparkSession, ledger: str) -> None:
    """Refuse (:class:`UsageError`) a ledger whose store cannot give two writers mutual exclusion
    (:func:`exclusion_problem`); the operator's :data:`EXCLUSIVE_OVERRIDE` turns it into a warning."""
    check_ledger_session(spark, ledger)
    if ledger in _EXCLUSIVE:
        return
    location = ledger_location(ledger) if is_path(ledger) else _table_location(spark, ledger)
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


def local_rows(ledger: str) -> list[dict[str, Any]] | None:
    """The rows of a local path ledger read with delta-rs, no Spark; None when Spark must read it
    (:mod:`~privsyn_spark.runtime.delta_rs`). :class:`LedgerMissing` when no ledger is there,
    :class:`LedgerDamaged` when versions of its log are missing."""
    try:
        rows = delta_rs.read_rows(ledger)
    except FileNotFoundError:
        raise missing(ledger) from None
    folder = local_path(ledger)
    gaps = delta_rs.missing_versions(folder) if rows is None and folder is not None else None
    if gaps:
        raise LedgerDamaged(ledger, gaps)
    return rows
