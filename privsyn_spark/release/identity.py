"""What a run id is: its charge (where its artifact lives, what the ledger charges) and its fingerprint.

A run id is bound to what it measured; a later call with the same run id must ask the same fingerprint
(compared by :func:`privsyn_spark.budget.fingerprint_check.fingerprint_mismatch`) or is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privsyn_spark.budget.fingerprint_check import fingerprint_mismatch, mismatch_message
from privsyn_spark.config import Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.accounting import RunBudget
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.unit import PrivacyUnit


@dataclass(frozen=True)
class Charge:
    """One run id's charge: where its artifact lives and what the ledger (None: no ledger) charges."""

    run_id: str
    runs_dir: str
    epsilon: float
    delta: float
    ledger: str | None = None
    dataset_id: str | None = None
    recharge: bool = False  # a reserved run whose artifact is lost pays for fresh measurements
    unit: PrivacyUnit = PrivacyUnit()  # the privacy unit charged: it must be the dataset budget's
    partition: tuple[tuple[str, str], ...] = ()  # the run's scoped partition values (recorded; per-partition budgets)
    rho: float = 0.0  # the zCDP budget charged (its epsilon at its delta: the API's RunBudget)

    def __post_init__(self) -> None:
        if not self.rho:  # built without the API's budget (tests, tools): converted here
            object.__setattr__(self, "rho", RunBudget.of(self.epsilon, self.delta).rho)

    def ledger_key(self) -> tuple[str, str]:
        """``(ledger, dataset_id)`` of a run charged to a ledger (:class:`UsageError` when one is missing)."""
        if not self.ledger:
            raise UsageError(f"run {self.run_id!r} is not charged to a ledger")
        if not self.dataset_id:
            raise UsageError("a ledger needs a dataset_id: the dataset's key in the ledger")
        return self.ledger, self.dataset_id


def absolute_location(source: str) -> str:
    """``source`` as a run id binds it: a local path made absolute, a URI or a catalog name as given."""
    if "://" not in source and ("/" in source or Path(source).exists()):
        return str(Path(source).expanduser().absolute())
    return source


def run_fingerprint(epsilon: float, delta: float, schema_hash: str, source: str | None, settings: Any = None,
                    input_version: str | None = None, delta_version: int | None = None) -> dict:
    """What a run id is bound to: a reuse must ask the same epsilon, delta, schema and input ``source``
    (its identity: :mod:`privsyn_spark.runtime.input_identity`; None: any input, a later step reading the
    measurements) and the same budget split, selection and people split when ``settings`` are not the defaults,
    and the same ``input_version`` of its files when both sides know it (``runtime.input_table.input_version``).
    A Delta input's ``delta_version`` is recorded: a reuse on another version is warned about, not refused."""
    fingerprint: dict[str, Any] = {"epsilon": float(epsilon), "delta": float(delta), "schema_hash": schema_hash}
    if source is not None:
        fingerprint["input"] = absolute_location(source)
    if input_version:
        fingerprint["input_version"] = input_version
    if delta_version is not None:
        fingerprint["input_delta_version"] = delta_version
    if settings is not None:  # a non-default budget split, selection or people split changes what is released
        default = Settings()
        keys = {"budget_split", "selection"}
        if settings.people_split != default.people_split:  # a flat run's fingerprint as before
            keys.add("people_split")
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
