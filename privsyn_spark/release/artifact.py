"""Where a run's persisted measurements are found: the runs dir's artifact, or the one the ledger committed.

With a ledger, the committed artifact is read wherever the ledger says it is, checked against its recorded
SHA-256 and copied into this runs dir; without, the runs dir's artifact is the run's. Everything a later
step does is post-processing of what these return.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from privsyn_spark.budget.ledger import dataset_state
from privsyn_spark.budget.ledger_state import RunReservation
from privsyn_spark.errors import BudgetRefused, UsageError
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, ArtifactUnreadable, Measurements, content_hash
from privsyn_spark.release.identity import INPUT_FIELDS, Charge, check_same_run
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.runtime.storage import ArtifactExists, has_scheme, storage_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class ArtifactLost(BudgetRefused):
    """The run id holds a reservation whose artifact cannot be found or read (no fresh noise without
    ``--recharge``)."""


def forced_reuse(spark: SparkSession, charge: Charge, fingerprint: dict) -> dict:
    """``fingerprint`` with the input identity of the measurements run ``release`` already holds (in the
    ledger, else in the runs dir): ``reuse="force"`` reuses them for this input, said in a warning (every
    other setting must still match). Unchanged when the run id has no measurements yet."""
    if charge.ledger:
        held = dataset_state(spark, *charge.ledger_key()).active(charge.run_id)
        found = held.fingerprint if held is not None else None
    else:
        local = local_artifact(charge.runs_dir, charge.run_id, spark, skip_unreadable=True)
        found = local.provenance.get("fingerprint") if local is not None else None
    if found is None:
        return fingerprint
    forced = {k: v for k, v in fingerprint.items() if k not in INPUT_FIELDS}
    forced.update({k: found[k] for k in INPUT_FIELDS if k in found})
    if forced != fingerprint:
        log.warning("run %s: reuse='force': reusing its measurements of input %s for input %s", charge.run_id,
                    found.get("input"), fingerprint.get("input"))
    return forced


def local_artifact(runs_dir: str, run_id: str, spark: SparkSession | None = None,
                   skip_unreadable: bool = False) -> Measurements | None:
    """The runs dir's artifact of ``run_id`` (None if there is none, or with ``skip_unreadable`` if it
    cannot be read: with a ledger, the ledger decides what a damaged copy means, as from any runs dir)."""
    artifacts = RunArtifacts(runs_dir, run_id, spark)
    data = artifacts.read("measurements", ARTIFACT_FILE)
    if data is None:
        return None
    try:
        return Measurements.from_bytes(data)
    except ArtifactUnreadable as err:
        if skip_unreadable:
            log.warning("run %s: %s cannot be read (%s); the ledger decides", run_id, artifacts.measurements, err)
            return None
        raise UsageError(f"run id {run_id!r}: {artifacts.measurements} cannot be read ({err}); "
                         f"use a new run id or runs dir") from err


def committed_measurements(spark: SparkSession, charge: Charge, fingerprint: dict) -> Measurements:
    """The run's measurements for the post-processing steps: with a ledger, the committed artifact
    (checked against its hash); without, the runs dir's. Refused if measured with other settings."""
    if charge.ledger:
        held = dataset_state(spark, *charge.ledger_key()).active(charge.run_id)
        if held is None or held.artifact_sha256 is None:
            raise UsageError(f"run {charge.run_id!r} has no committed measurements in ledger {charge.ledger} "
                             f"(dataset {charge.dataset_id!r}); run the `measure` step first")
        found = find_committed(spark, RunArtifacts(charge.runs_dir, charge.run_id, spark), held)
        if found is None:
            raise ArtifactLost(f"run {charge.run_id!r}: its measurements ({held.artifact}) are missing or do not "
                               f"match the ledger's hash")
        measurements = found[0]
    else:
        local = local_artifact(charge.runs_dir, charge.run_id, spark)
        if local is None:
            location = RunArtifacts(charge.runs_dir, charge.run_id, spark).base
            raise UsageError(f"run {charge.run_id!r} has no measurements in {location}; "
                             f"run the `measure` step first")
        measurements = local
    check_same_run(measurements, fingerprint, charge.run_id)
    return measurements


def find_committed(spark: SparkSession, artifacts: RunArtifacts, held: RunReservation,
                   adopt: bool = False) -> tuple[Measurements, str, str] | None:
    """``(measurements, sha256, location)`` of the reservation's artifact: at its recorded location or
    in this runs dir, matching the recorded hash (or, with ``adopt`` and no commit yet, written by the
    holding attempt). A copy is left in this runs dir. None when no such artifact can be read."""
    candidates = list(dict.fromkeys([held.artifact, artifacts.measurements]))
    for where in candidates:
        try:
            storage = artifacts.storage if where == artifacts.measurements else storage_for(
                where, spark if has_scheme(where) else None)
            if not storage.exists(where):
                continue
            data = storage.read(where)
            measurements = Measurements.from_bytes(data)
        except Exception as err:  # noqa: BLE001 - unreadable bytes, or an error of the (Hadoop) file system
            log.warning("run %s: the artifact at %s cannot be read (%s)", held.run_id, where, type(err).__name__)
            continue
        sha = content_hash(data)
        if held.artifact_sha256 is not None:
            if sha != held.artifact_sha256:
                log.warning("run %s: the artifact at %s does not match the ledger's hash", held.run_id, where)
                continue
        elif not (adopt and measurements.provenance.get("attempt") == held.attempt):
            continue
        if where != artifacts.measurements:
            try:
                artifacts.storage.write(artifacts.measurements, data, overwrite=False)
            except ArtifactExists:
                pass  # a different file there never replaces the ledger's: later steps check the hash
        return measurements, sha, where
    return None
