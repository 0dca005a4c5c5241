"""The measurements artifact: the only thing later pipeline steps may read (see docs/architecture.md).

One file, ``measurements.npz``: the noisy arrays plus the description as a JSON entry, and a SHA-256
of both (:func:`entries_checksum`) checked on every load, with or without a ledger. It is built as
bytes (:meth:`Measurements.to_bytes`) so the caller can write it atomically to any storage and record
its content hash (:func:`content_hash`) in the budget ledger; no Spark here.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.unit import PrivacyUnit


@dataclass(frozen=True)
class NoisyMarginal:
    """One noisy count table on the merged domain: axes in canonical ``attrs`` order."""

    attrs: tuple[str, ...]
    values: np.ndarray  # float64 holding the noisy integer counts, shape = domain.shape(attrs)
    sigma: float        # standard deviation of the noise on each cell
    rho: float          # zCDP budget spent on this table


def weighted_total(tables: Iterable[tuple[np.ndarray, float]]) -> float | None:
    """The row count from noisy tables over all records, each ``(table, sigma)``: the inverse-variance
    weighted mean of their sums (a table's sum is unbiased for n with variance cells * sigma^2; post-
    processing). None without tables."""
    sums, weights = [], []
    for table, sigma in tables:
        sums.append(float(np.sum(table)))
        weights.append(1.0 / (table.size * float(sigma) ** 2))
    return float(np.dot(sums, weights) / np.sum(weights)) if sums else None


ARTIFACT_FILE = "measurements.npz"
FORMAT_VERSION = 3
UNCHECKED_FORMAT = 2
"""Artifacts written before the checksum: still read, with a warning."""
_META = "__meta__"
_CHECKSUM = "__sha256__"

log = logging.getLogger(__name__)


class ArtifactUnreadable(ValueError):
    """Bytes that are not a measurements artifact of this format (or whose checksum does not match)."""


def entries_checksum(entries: Mapping[str, np.ndarray]) -> str:
    """SHA-256 (hex) of an artifact's entries (name, dtype, shape and bytes of each, by name), stored in the
    artifact itself. Threat model: integrity against accidents and naive edits (counts scaled in place),
    not against an adversary who rewrites both the entries and this checksum (the ledger's hash is that)."""
    digest = hashlib.sha256()
    for name in sorted(entries):
        array = np.ascontiguousarray(entries[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def content_hash(data: bytes) -> str:
    """SHA-256 (hex) of an artifact's bytes, as recorded in the budget ledger."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Measurements:
    """Everything the privacy core releases for one run; later steps read only this.

    ``domain`` is the merged domain (after rare-value merging) all ``marginals`` live on;
    ``value_maps[attr][original_code]`` is the merged code; ``one_way_original`` are the noisy 1-way
    counts on the original (encoder) domain, for expanding a merged value back at decoding;
    ``noisy_total`` is a post-processed estimate of the row count (never the true count);
    ``ledger`` lists every release with its rho, sensitivity and sigma (they sum to ``rho``).
    """

    run_id: str
    schema_hash: str
    original_domain: Domain
    domain: Domain
    value_maps: dict[str, np.ndarray]
    one_way_original: dict[str, np.ndarray]
    noisy_total: float
    marginals: list[NoisyMarginal]
    ledger: list[dict]
    rho: float
    epsilon: float | None = None
    delta: float | None = None
    selected_pairs: list[tuple[str, ...]] = field(default_factory=list)  # DenseMarg picks, before combining
    provenance: dict = field(default_factory=dict)  # what the run measured (input, attempt), set by the caller
    privacy_unit: dict = field(default_factory=lambda: PrivacyUnit().record())  # the unit and K it was measured for
    policy_checks: dict = field(default_factory=dict)  # the `fail` policies' noisy tallies (privacy/policy_checks.py)
    persons: Measurements | None = None  # a people run: the person table's measurements (privacy/people.py)
    degrees: NoisyMarginal | None = None  # a people run: the noisy degree histogram over 1..M

    def one_way_sigmas(self) -> dict[str, float]:
        """The noise sigma of each attribute's 1-way release (its first 1-way marginal; the 1-way rho is
        shared by ``BudgetSplit.one_way_allocation``, so the sigmas may differ between attributes)."""
        sigmas: dict[str, float] = {}
        for m in self.marginals:
            if len(m.attrs) == 1:
                sigmas.setdefault(m.attrs[0], float(m.sigma))
        return sigmas

    @property
    def spent_rho(self) -> float:
        """Sum of the rho of every ledger entry."""
        return float(sum(e["rho"] for e in self.ledger))

    def to_bytes(self) -> bytes:
        """The artifact as the bytes of one ``.npz`` (arrays + a JSON description)."""
        arrays: dict[str, Any] = {}
        for j, attr in enumerate(self.original_domain.attrs):
            arrays[f"value_map_{j}"] = np.asarray(self.value_maps[attr], dtype=np.int64)
            arrays[f"one_way_original_{j}"] = np.asarray(self.one_way_original[attr], dtype=np.float64)
        for i, m in enumerate(self.marginals):
            arrays[f"marginal_{i}"] = np.asarray(m.values, dtype=np.float64)
        if self.persons is not None:  # its own checksummed bytes, covered by this artifact's checksum too
            arrays["persons"] = np.frombuffer(self.persons.to_bytes(), dtype=np.uint8)
        if self.degrees is not None:
            arrays["degrees"] = np.asarray(self.degrees.values, dtype=np.float64)
        meta = {
            "format_version": FORMAT_VERSION,
            "run_id": self.run_id,
            "schema_hash": self.schema_hash,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "noisy_total": self.noisy_total,
            "original_domain": [[a, s] for a, s in zip(self.original_domain.attrs, self.original_domain.sizes)],
            "domain": [[a, s] for a, s in zip(self.domain.attrs, self.domain.sizes)],
            "marginals": [{"attrs": list(m.attrs), "sigma": m.sigma, "rho": m.rho, "array": f"marginal_{i}"}
                          for i, m in enumerate(self.marginals)],
            "selected_pairs": [list(p) for p in self.selected_pairs],
            "ledger": self.ledger,
            "provenance": self.provenance,
            "privacy_unit": self.privacy_unit,
            "policy_checks": self.policy_checks,
        }
        if self.degrees is not None:
            meta["degrees"] = {"attrs": list(self.degrees.attrs), "sigma": self.degrees.sigma, "rho": self.degrees.rho}
        text = json.dumps(meta, default=_json_default).encode("utf-8")
        arrays[_META] = np.frombuffer(text, dtype=np.uint8)
        arrays[_CHECKSUM] = np.frombuffer(entries_checksum(arrays).encode("ascii"), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Measurements":
        """Read an artifact made by :meth:`to_bytes`; ``ArtifactUnreadable`` if it is not one."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                meta = json.loads(npz[_META].tobytes().decode("utf-8"))
                _check_integrity(npz, meta.get("format_version"))
                original = Domain.from_dict({a: int(s) for a, s in meta["original_domain"]})
                merged = Domain.from_dict({a: int(s) for a, s in meta["domain"]})
                value_maps = {a: npz[f"value_map_{j}"] for j, a in enumerate(original.attrs)}
                one_way = {a: npz[f"one_way_original_{j}"] for j, a in enumerate(original.attrs)}
                marginals = [NoisyMarginal(tuple(m["attrs"]), npz[m["array"]], float(m["sigma"]),
                                           float(m["rho"])) for m in meta["marginals"]]
                persons = cls.from_bytes(npz["persons"].tobytes()) if "persons" in npz.files else None
                hist = meta.get("degrees")
                degrees = (NoisyMarginal(tuple(hist["attrs"]), npz["degrees"], float(hist["sigma"]), float(hist["rho"]))
                           if hist else None)
        except ArtifactUnreadable:
            raise
        except Exception as err:  # noqa: BLE001 - truncated, corrupt or foreign bytes
            raise ArtifactUnreadable(f"not a measurements artifact ({type(err).__name__})") from err
        return cls(run_id=meta["run_id"], schema_hash=meta["schema_hash"], original_domain=original,
                   domain=merged, value_maps=value_maps, one_way_original=one_way,
                   noisy_total=float(meta["noisy_total"]), marginals=marginals, ledger=meta["ledger"],
                   rho=float(meta["rho"]), epsilon=meta["epsilon"], delta=meta["delta"],
                   selected_pairs=[tuple(p) for p in meta.get("selected_pairs", [])],
                   provenance=meta.get("provenance", {}), policy_checks=meta.get("policy_checks", {}),
                   privacy_unit=meta.get("privacy_unit", PrivacyUnit().record()), persons=persons, degrees=degrees)

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/measurements.npz`` atomically (a temporary file, then a rename)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / (ARTIFACT_FILE + ".tmp")
        tmp.write_bytes(self.to_bytes())
        os.replace(tmp, folder / ARTIFACT_FILE)
        return folder

    @staticmethod
    def exists(folder: str | Path) -> bool:
        """True if ``folder`` holds a complete measurements artifact."""
        return (Path(folder) / ARTIFACT_FILE).is_file()

    @classmethod
    def load(cls, folder: str | Path) -> "Measurements":
        """Read an artifact written by ``save`` (numpy + json only, no Spark)."""
        return cls.from_bytes((Path(folder) / ARTIFACT_FILE).read_bytes())

    @classmethod
    def load_for_run(cls, folder: str | Path, run_id: str, schema_hash: str) -> "Measurements | None":
        """The artifact of ``run_id`` in ``folder`` if there is one (re-runs reuse it and spend nothing).

        Returns None if ``folder`` has no artifact; raises ``ValueError`` if it holds another run's
        artifact or one made under a different schema, rather than silently mixing runs.
        """
        if not cls.exists(folder):
            return None
        found = cls.load(folder)
        if found.run_id != run_id or found.schema_hash != schema_hash:
            raise ValueError(f"{folder} holds measurements of run {found.run_id!r} (schema {found.schema_hash!r}), "
                             f"not run {run_id!r} (schema {schema_hash!r})")
        return found


def _check_integrity(npz: Any, version: Any) -> None:
    """:class:`ArtifactUnreadable` unless the entries match the artifact's checksum (an artifact of the
    format before checksums is read with a warning)."""
    if version == UNCHECKED_FORMAT:
        log.warning("a measurements artifact of format %d carries no checksum (written by an earlier version): "
                    "read unchecked", version)
        return
    if version != FORMAT_VERSION:
        raise ArtifactUnreadable(f"unsupported measurements format {version}")
    entries = {name: npz[name] for name in npz.files if name != _CHECKSUM}
    stored = npz[_CHECKSUM].tobytes().decode("ascii") if _CHECKSUM in npz.files else None
    if stored != entries_checksum(entries):
        raise ArtifactUnreadable("its content does not match its checksum: damaged or edited after it was written")


def _json_default(obj: object) -> object:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, set)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
