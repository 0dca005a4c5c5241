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

Without a ledger (``--no-ledger``) only the runs dir's artifact is reused. A run's identity is in
:mod:`privsyn_spark.release.identity`, where its committed artifact is found in :mod:`privsyn_spark.release.artifact`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger_state import RunReservation
from privsyn_spark.budget.ledger_summary import ledger_summary
from privsyn_spark.errors import PrivsynError, UsageError
from privsyn_spark.privacy.measurements import Measurements, content_hash
from privsyn_spark.privacy.noise import NoiseSampler, SecureDiscreteGaussian, sampled_sigma, sampler_name
from privsyn_spark.release.artifact import ArtifactLost, find_committed, forced_reuse, local_artifact
from privsyn_spark.release.identity import Charge, check_same_run
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.input_identity import StaleInputWarning, frame_identity, moved_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from privsyn_spark.measure.input_codes import InputCodes

log = logging.getLogger(__name__)

#: (sampler, provenance) -> the run's fresh measurements (counts the data, draws the noise).
Draw = Callable[[NoiseSampler, dict], Measurements]

PAUSE_BEFORE_DRAW_ENV = "PRIVSYN_TEST_PAUSE_BEFORE_DRAW"
"""Test hook, inert unless set (docs/reliability.md): a path; the holder of a reservation about to record
``drawn`` creates that file and sleeps until it is removed (10 minutes at most), so a fault test can
``kill -9`` the run at the last moment it provably drew no noise, or let a second attempt take its
reservation over first (tests/command_line/test_kill_retry.py). Never set in production."""


def _pause_for_fault_tests() -> None:
    marker = os.environ.get(PAUSE_BEFORE_DRAW_ENV)
    if marker:
        log.warning("%s is set (a fault test): pausing before the first noise draw", PAUSE_BEFORE_DRAW_ENV)
        Path(marker).write_text(f"{os.getpid()}\n")
        end = time.monotonic() + 600
        while Path(marker).exists() and time.monotonic() < end:
            time.sleep(0.2)


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


def guarded_measure(spark: SparkSession, charge: Charge, fingerprint: dict, draw: Draw,
                    sampler: NoiseSampler) -> Measurements:
    """The run's measurements: reused, or drawn once under the ledger's reservation (module docstring)."""
    artifacts = RunArtifacts(charge.runs_dir, charge.run_id, spark)
    attempt = uuid.uuid4().hex
    provenance = {"fingerprint": fingerprint, "attempt": attempt}
    if not charge.ledger:
        local = local_artifact(charge.runs_dir, charge.run_id, spark)
        if local is not None:
            check_same_run(local, fingerprint, charge.run_id)
            log.info("run %s: reusing the measurements in %s (no ledger)", charge.run_id, artifacts.measurements)
            return local
        return _draw_and_persist(artifacts, draw, sampler, provenance, overwrite=False)

    ledger, dataset_id = charge.ledger_key()
    reservation = L.reserve(spark, ledger, dataset_id, charge.run_id, rho=charge.rho,
                            epsilon=charge.epsilon, delta=charge.delta, fingerprint=fingerprint,
                            artifact=artifacts.measurements, attempt=attempt, unit=charge.unit,
                            partition=dict(charge.partition))
    for _ in range(3):
        if reservation.charged:
            return _holder(spark, charge, artifacts, reservation, draw, sampler, provenance)
        found = find_committed(spark, artifacts, reservation.held, adopt=True)
        if found is not None:
            measurements, sha, where = found
            if reservation.held.artifact_sha256 is None:
                L.commit(spark, ledger, reservation, where, sha)
            log.info("run %s: reusing its measurements (%s; reservation #%d): nothing charged, no noise drawn",
                     charge.run_id, where, reservation.seq)
            return measurements
        if reservation.held.provably_undrawn and L.refund(spark, ledger, reservation):  # take it over
            log.warning("run %s: reservation #%d has no noise drawn on it (its attempt stopped before any, or "
                        "is still reading and stops at its first draw): refunded and charged again for this attempt",
                        charge.run_id, reservation.seq)
            reservation = L.reserve(spark, ledger, dataset_id, charge.run_id, rho=charge.rho,
                                    epsilon=charge.epsilon, delta=charge.delta, fingerprint=fingerprint,
                                    artifact=artifacts.measurements, attempt=attempt, unit=charge.unit,
                                    partition=dict(charge.partition))
            continue
        if not charge.recharge:
            raise ArtifactLost(_lost_message(charge, reservation.held))
        log.warning("run %s: its measurements are lost; --recharge: charging a fresh release", charge.run_id)
        reservation = L.reserve(spark, ledger, dataset_id, charge.run_id, rho=charge.rho,
                                epsilon=charge.epsilon, delta=charge.delta, fingerprint=fingerprint,
                                artifact=artifacts.measurements, attempt=attempt,
                                recharge_of=reservation.seq, unit=charge.unit, partition=dict(charge.partition))
    raise L.LedgerContention(f"run {charge.run_id!r}: its reservation kept changing under concurrent attempts")


def _lost_message(charge: Charge, held: RunReservation) -> str:
    what = ("its artifact is missing or does not match the recorded hash" if held.artifact_sha256
            else "its measurements were never committed (another attempt may still be measuring, or one "
                 "crashed after drawing noise)")
    return (f"run id {charge.run_id!r} holds reservation #{held.seq} of dataset {charge.dataset_id!r} but {what}: "
            f"{held.artifact}; restore it, wait for the other attempt, or pass --recharge to pay for fresh "
            f"measurements")


def _holder(spark: SparkSession, charge: Charge, artifacts: RunArtifacts, reservation: Any, draw: Draw,
            sampler: NoiseSampler, provenance: dict) -> Measurements:
    """Draw the noise as the reservation's holder; refund only if nothing was drawn nor written."""
    ledger = charge.ledger_key()[0]
    if not charge.recharge and artifacts.storage.exists(artifacts.measurements):
        L.refund(spark, ledger, reservation)  # nothing drawn; the file there is not this attempt's
        raise UsageError(f"run id {charge.run_id!r} already has measurements in {artifacts.measurements} that "
                         f"ledger {charge.ledger} does not record (measured with --no-ledger or another "
                         f"ledger); use a new run id")
    tracking = TrackingSampler(sampler, lambda: L.mark_drawn(spark, ledger, reservation))
    try:
        measurements = draw(tracking, provenance)
        data = measurements.to_bytes()
        artifacts.storage.write(artifacts.measurements, data, overwrite=bool(charge.recharge))
    except BaseException as err:
        if not tracking.drawn and not _exists(artifacts, artifacts.measurements, provenance["attempt"]):
            L.refund(spark, ledger, reservation)
        if isinstance(err, L.ReservationTakenOver):
            raise AttemptTakenOver(f"run {charge.run_id!r}: another attempt of this run id took its reservation "
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


def guarded_run(synth: Any, codes: InputCodes, charge: Charge, draw: Draw, reuse: str, record: RunRecord,
                drawn: list) -> tuple[Measurements, RunRecord]:
    """The measurements of the input ``codes`` for ``release`` (``synth``: the :class:`~privsyn_spark.PrivSyn`,
    whose floor imports this one): drawn once by ``draw`` under the ledger's reservation, or reused
    (:func:`guarded_measure`; ``reuse="force"`` takes the held run's input identity), and the run's record:
    ``record`` when ``draw`` ran (it appends to ``drawn``), else the one the drawing step kept, with the
    dataset's ledger after the run."""
    spark, run_id = codes.spark, charge.run_id
    fingerprint = synth.fingerprint(codes.label or frame_identity(codes.raw()), spark, getattr(codes, "fmt", None),
                                    codes.source if isinstance(codes.source, str) else None, codes.files)
    if reuse == "force":
        fingerprint = forced_reuse(spark, charge, fingerprint)
    measurements = guarded_measure(spark, charge, fingerprint, draw, SecureDiscreteGaussian())
    if not drawn:  # reused: what the step that drew them found
        record = RunRecord.from_state(synth.run_folder(run_id, spark).read_state())
        stale = moved_version(measurements.provenance.get("fingerprint", {}), fingerprint)
        if stale:
            warnings.warn(f"run id {run_id!r} reused: {stale}; use a new run id to measure it", StaleInputWarning,
                          stacklevel=4)
    if synth.ledger:
        record.dataset_ledger = ledger_summary(L.dataset_state(spark, *charge.ledger_key()), synth.ledger,
                                               str(synth.dataset_id), run_id, codes.scope.values(),
                                               codes.scope.label() if codes.scope.partition else None)
    return measurements, record

