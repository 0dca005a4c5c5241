"""The measure step's contract with the budget ledger: the ledger owns the noise.

With a ledger, a run id is charged once and its noise is drawn once:

1. reserve the run's rho (refused without a budget, over budget, or when the run id was measured
   with other settings); the reservation records the attempt and where the artifact goes;
2. only the attempt that holds the reservation draws noise; it writes the artifact atomically
   (never replacing one) and then records its content hash in the ledger (commit); nothing derived
   from the measurements leaves the process before the artifact is written;
3. any other call (a retry, a racing attempt, the same run id from another runs dir) reuses the
   committed artifact wherever the ledger says it is (checked against its hash, copied into this
   runs dir); an uncommitted reservation is adopted only if the artifact its attempt wrote is there;
   otherwise the run is refused (:class:`ArtifactLost`) unless ``recharge`` pays for fresh noise;
4. a holder that fails before drawing any noise, with no artifact written, refunds its reservation;
   after the first draw the reservation is kept whatever happens. Before its first draw the holder
   records ``drawn`` in the ledger (:func:`~privsyn_spark.budget.ledger.mark_drawn`), so an attempt
   killed or timed out before it (while reading or counting) provably drew nothing: a retry takes its
   reservation over (refunds it, charges its own: one charge in all) instead of being refused.

Without a ledger (``--no-ledger``) only the runs dir's artifact is reused.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger import dataset_state
from privsyn_spark.budget.ledger_state import RunReservation, fingerprint_mismatch, mismatch_message
from privsyn_spark.config import Settings
from privsyn_spark.errors import BudgetRefused, PrivsynError, UsageError
from privsyn_spark.privacy.accounting import RunBudget
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, ArtifactUnreadable, Measurements, content_hash
from privsyn_spark.privacy.noise import NoiseSampler, sampled_sigma, sampler_name
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.runtime.storage import ArtifactExists, has_scheme, storage_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: (sampler, provenance) -> the run's fresh measurements (counts the data, draws the noise).
Draw = Callable[[NoiseSampler, dict], Measurements]

PAUSE_BEFORE_DRAW_ENV = "PRIVSYN_TEST_PAUSE_BEFORE_DRAW"
"""Test hook, inert unless set (docs/reliability.md): a path; the holder of a reservation about to record
``drawn`` creates that file and sleeps until it is removed (10 minutes at most), so a fault test can
``kill -9`` the run at the last moment it provably drew no noise, or let a second attempt take its
reservation over first (tests/cli/test_kill_retry.py). Never set in production."""


def _pause_for_fault_tests() -> None:
    marker = os.environ.get(PAUSE_BEFORE_DRAW_ENV)
    if marker:
        log.warning("%s is set (a fault test): pausing before the first noise draw", PAUSE_BEFORE_DRAW_ENV)
        Path(marker).write_text(f"{os.getpid()}\n")
        end = time.monotonic() + 600
        while Path(marker).exists() and time.monotonic() < end:
            time.sleep(0.2)


class ArtifactLost(BudgetRefused):
    """The run id holds a reservation whose artifact cannot be found or read (no fresh noise without
    ``--recharge``)."""


class AttemptTakenOver(PrivsynError):
    """Another attempt of the run id took this one's reservation over before this one drew any noise
    (exit 1: a retry reuses what that attempt commits)."""


class TrackingSampler:
    """A sampler that remembers whether any noise was drawn (then the reservation is never refunded);
    ``before_first`` runs once before the first draw (the ledger's durable ``drawn`` record)."""

    def __init__(self, inner: NoiseSampler, before_first: Callable[[], None] | None = None) -> None:
        self.inner, self.drawn, self.before_first = inner, False, before_first
        self.source = sampler_name(inner)  # what the accountant's ledger records as the noise source

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        if not self.drawn and self.before_first is not None:
            _pause_for_fault_tests()
            self.before_first()  # raises when the reservation was taken over: nothing drawn
        self.drawn = True
        return self.inner.discrete_gaussian(sigma, size)

    def sigma_used(self, sigma: float) -> float:
        """The scale the wrapped sampler draws at (see :func:`privsyn_spark.privacy.noise.sampled_sigma`)."""
        return sampled_sigma(self.inner, sigma)


@dataclass(frozen=True)
class Release:
    """One run id's release: where its artifact lives and what the ledger (None: no ledger) charges."""

    run_id: str
    runs_dir: str
    epsilon: float
    delta: float
    ledger: str | None = None
    dataset_id: str | None = None
    recharge: bool = False  # a reserved run whose artifact is lost pays for fresh measurements
    unit: PrivacyUnit = PrivacyUnit()  # the privacy unit charged: it must be the dataset budget's
    partition: tuple[tuple[str, str], ...] = ()  # the run's scoped partition values (recorded; per-partition budgets)
    rho: float = 0.0  # the zCDP budget of the release (its epsilon at its delta: the API's RunBudget)

    def __post_init__(self) -> None:
        if not self.rho:  # built without the API's budget (tests, tools): converted here
            object.__setattr__(self, "rho", RunBudget.of(self.epsilon, self.delta).rho)

    def ledger_key(self) -> tuple[str, str]:
        """``(ledger, dataset_id)`` of a release charged to a ledger (:class:`UsageError` when one is missing)."""
        if not self.ledger:
            raise UsageError(f"run {self.run_id!r} is not charged to a ledger")
        if not self.dataset_id:
            raise UsageError("a ledger needs a dataset_id: the dataset's key in the ledger")
        return self.ledger, self.dataset_id


def run_fingerprint(epsilon: float, delta: float, schema_hash: str, source: str | None, settings: Any = None,
                    input_version: str | None = None, delta_version: int | None = None) -> dict:
    """What a run id is bound to: a reuse must ask the same epsilon, delta, schema and input ``source``
    (its identity: :mod:`privsyn_spark.runtime.input_identity`; None: any input, a later step reading the
    measurements) and the same budget split, selection and people split when ``settings`` are not the defaults,
    and the same ``input_version`` of its files when both sides know it (``runtime.input_table.input_version``).
    A Delta input's ``delta_version`` is recorded: a reuse on another version is warned about, not refused."""
    fingerprint: dict[str, Any] = {"epsilon": float(epsilon), "delta": float(delta), "schema_hash": schema_hash}
    if source is not None:
        if "://" not in source and ("/" in source or Path(source).exists()):
            source = str(Path(source).expanduser().absolute())
        fingerprint["input"] = source
    if input_version:
        fingerprint["input_version"] = input_version
    if delta_version is not None:
        fingerprint["input_delta_version"] = delta_version
    if settings is not None:  # a non-default budget split or selection changes what is released
        default = Settings()
        keys = ("budget_split", "selection") + (("people_split",) if settings.people_split != default.people_split
                                                else ())  # a flat run's fingerprint as before
        if (settings.split, settings.selection) != (default.split, default.selection) or len(keys) == 3:
            fingerprint["measure_settings"] = {k: v for k, v in settings.to_dict().items() if k in keys}
    return fingerprint


def check_same_run(measurements: Measurements, fingerprint: dict, run_id: str) -> None:
    """``UsageError`` when the artifact was measured with other settings than ``fingerprint``."""
    diff = fingerprint_mismatch(measurements.provenance.get("fingerprint", {}), fingerprint)
    if diff:
        raise UsageError(mismatch_message(run_id, diff))


INPUT_FIELDS = ("input", "input_version", "input_delta_version")
"""The fingerprint's input identity (what ``reuse="force"`` takes from the run's measurements)."""


def forced_reuse(spark: SparkSession, release: Release, fingerprint: dict) -> dict:
    """``fingerprint`` with the input identity of the measurements run ``release`` already holds (in the
    ledger, else in the runs dir): ``reuse="force"`` reuses them for this input, said in a warning (every
    other setting must still match). Unchanged when the run id has no measurements yet."""
    if release.ledger:
        held = dataset_state(spark, *release.ledger_key()).active(release.run_id)
        found = held.fingerprint if held is not None else None
    else:
        local = local_artifact(release.runs_dir, release.run_id, spark, skip_unreadable=True)
        found = local.provenance.get("fingerprint") if local is not None else None
    if found is None:
        return fingerprint
    forced = {k: v for k, v in fingerprint.items() if k not in INPUT_FIELDS}
    forced.update({k: found[k] for k in INPUT_FIELDS if k in found})
    if forced != fingerprint:
        log.warning("run %s: reuse='force': reusing its measurements of input %s for input %s", release.run_id,
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


def committed_measurements(spark: SparkSession, release: Release, fingerprint: dict) -> Measurements:
    """The run's measurements for the post-processing steps: with a ledger, the committed artifact
    (checked against its hash); without, the runs dir's. Refused if measured with other settings."""
    if release.ledger:
        held = dataset_state(spark, *release.ledger_key()).active(release.run_id)
        if held is None or held.artifact_sha256 is None:
            raise UsageError(f"run {release.run_id!r} has no committed measurements in ledger {release.ledger} "
                             f"(dataset {release.dataset_id!r}); run the `measure` step first")
        found = find_committed(spark, RunArtifacts(release.runs_dir, release.run_id, spark), held)
        if found is None:
            raise ArtifactLost(f"run {release.run_id!r}: its measurements ({held.artifact}) are missing or do not "
                               f"match the ledger's hash")
        measurements = found[0]
    else:
        local = local_artifact(release.runs_dir, release.run_id, spark)
        if local is None:
            location = RunArtifacts(release.runs_dir, release.run_id, spark).base
            raise UsageError(f"run {release.run_id!r} has no measurements in {location}; "
                             f"run the `measure` step first")
        measurements = local
    check_same_run(measurements, fingerprint, release.run_id)
    return measurements


def guarded_measure(spark: SparkSession, release: Release, fingerprint: dict, draw: Draw,
                    sampler: NoiseSampler) -> Measurements:
    """The run's measurements: reused, or drawn once under the ledger's reservation (module docstring)."""
    artifacts = RunArtifacts(release.runs_dir, release.run_id, spark)
    attempt = uuid.uuid4().hex
    provenance = {"fingerprint": fingerprint, "attempt": attempt}
    if not release.ledger:
        local = local_artifact(release.runs_dir, release.run_id, spark)
        if local is not None:
            check_same_run(local, fingerprint, release.run_id)
            log.info("run %s: reusing the measurements in %s (no ledger)", release.run_id, artifacts.measurements)
            return local
        return _draw_and_persist(artifacts, draw, sampler, provenance, overwrite=False)

    ledger, dataset_id = release.ledger_key()
    reservation = L.reserve(spark, ledger, dataset_id, release.run_id, rho=release.rho,
                            epsilon=release.epsilon, delta=release.delta, fingerprint=fingerprint,
                            artifact=artifacts.measurements, attempt=attempt, unit=release.unit,
                            partition=dict(release.partition))
    for _ in range(3):
        if reservation.charged:
            return _holder(spark, release, artifacts, reservation, draw, sampler, provenance)
        found = find_committed(spark, artifacts, reservation.held, adopt=True)
        if found is not None:
            measurements, sha, where = found
            if reservation.held.artifact_sha256 is None:
                L.commit(spark, ledger, reservation, where, sha)
            log.info("run %s: reusing its measurements (%s; reservation #%d): nothing charged, no noise drawn",
                     release.run_id, where, reservation.seq)
            return measurements
        if reservation.held.provably_undrawn and L.refund(spark, ledger, reservation):  # take it over
            log.warning("run %s: reservation #%d has no noise drawn on it (its attempt stopped before any, or "
                        "is still reading and stops at its first draw): refunded and charged again for this attempt",
                        release.run_id, reservation.seq)
            reservation = L.reserve(spark, ledger, dataset_id, release.run_id, rho=release.rho,
                                    epsilon=release.epsilon, delta=release.delta, fingerprint=fingerprint,
                                    artifact=artifacts.measurements, attempt=attempt, unit=release.unit,
                                    partition=dict(release.partition))
            continue
        if not release.recharge:
            raise ArtifactLost(_lost_message(release, reservation.held))
        log.warning("run %s: its measurements are lost; --recharge: charging a fresh release", release.run_id)
        reservation = L.reserve(spark, ledger, dataset_id, release.run_id, rho=release.rho,
                                epsilon=release.epsilon, delta=release.delta, fingerprint=fingerprint,
                                artifact=artifacts.measurements, attempt=attempt,
                                recharge_of=reservation.seq, unit=release.unit, partition=dict(release.partition))
    raise L.LedgerContention(f"run {release.run_id!r}: its reservation kept changing under concurrent attempts")


def _lost_message(release: Release, held: RunReservation) -> str:
    what = ("its artifact is missing or does not match the recorded hash" if held.artifact_sha256
            else "its measurements were never committed (another attempt may still be measuring, or one "
                 "crashed after drawing noise)")
    return (f"run id {release.run_id!r} holds reservation #{held.seq} of dataset {release.dataset_id!r} but {what}: "
            f"{held.artifact}; restore it, wait for the other attempt, or pass --recharge to pay for fresh "
            f"measurements")


def _holder(spark: SparkSession, release: Release, artifacts: RunArtifacts, reservation: Any, draw: Draw,
            sampler: NoiseSampler, provenance: dict) -> Measurements:
    """Draw the noise as the reservation's holder; refund only if nothing was drawn nor written."""
    ledger = release.ledger_key()[0]
    if not release.recharge and artifacts.storage.exists(artifacts.measurements):
        L.refund(spark, ledger, reservation)  # nothing drawn; the file there is not this attempt's
        raise UsageError(f"run id {release.run_id!r} already has measurements in {artifacts.measurements} that "
                         f"ledger {release.ledger} does not record (measured with --no-ledger or another "
                         f"ledger); use a new run id")
    tracking = TrackingSampler(sampler, lambda: L.mark_drawn(spark, ledger, reservation))
    try:
        measurements = draw(tracking, provenance)
        data = measurements.to_bytes()
        artifacts.storage.write(artifacts.measurements, data, overwrite=bool(release.recharge))
    except BaseException as err:
        if not tracking.drawn and not _exists(artifacts, artifacts.measurements, provenance["attempt"]):
            L.refund(spark, ledger, reservation)
        if isinstance(err, L.ReservationTakenOver):
            raise AttemptTakenOver(f"run {release.run_id!r}: another attempt of this run id took its reservation "
                                   f"over while this one was still reading (no noise drawn here); let that "
                                   f"attempt finish, then rerun to reuse its measurements") from None
        raise
    L.commit(spark, ledger, reservation, artifacts.measurements, content_hash(data))
    return measurements


def _exists(artifacts: RunArtifacts, location: str, attempt: str) -> bool:
    """Whether ``location`` holds an artifact written by ``attempt`` (True when unsure: no refund)."""
    try:
        if not artifacts.storage.exists(location):
            return False
        return Measurements.from_bytes(artifacts.storage.read(location)).provenance.get("attempt") == attempt
    except Exception:  # noqa: BLE001 - cannot tell: keep the reservation
        return True


def _draw_and_persist(artifacts: RunArtifacts, draw: Draw, sampler: NoiseSampler, provenance: dict,
                      overwrite: bool) -> Measurements:
    measurements = draw(sampler, provenance)
    artifacts.storage.write(artifacts.measurements, measurements.to_bytes(), overwrite=overwrite)
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
