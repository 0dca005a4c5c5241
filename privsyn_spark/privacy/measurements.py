"""The measurements artifact: the only thing later pipeline steps may read (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from privsyn_spark.domain import Domain


@dataclass(frozen=True)
class NoisyMarginal:
    """One noisy count table on the merged domain: axes in canonical ``attrs`` order."""

    attrs: tuple[str, ...]
    values: np.ndarray  # float64 holding the noisy integer counts, shape = domain.shape(attrs)
    sigma: float        # standard deviation of the noise on each cell
    rho: float          # zCDP budget spent on this table


ARTIFACT_JSON = "measurements.json"
ARTIFACT_NPZ = "measurements.npz"
FORMAT_VERSION = 1


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

    @property
    def spent_rho(self) -> float:
        """Sum of the rho of every ledger entry."""
        return float(sum(e["rho"] for e in self.ledger))

    def save(self, folder: str | Path) -> Path:
        """Write ``measurements.npz`` then ``measurements.json`` (atomically; the JSON marks completion)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for j, attr in enumerate(self.original_domain.attrs):
            arrays[f"value_map_{j}"] = np.asarray(self.value_maps[attr], dtype=np.int64)
            arrays[f"one_way_original_{j}"] = np.asarray(self.one_way_original[attr], dtype=np.float64)
        for i, m in enumerate(self.marginals):
            arrays[f"marginal_{i}"] = np.asarray(m.values, dtype=np.float64)
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
        }
        tmp_npz = folder / (ARTIFACT_NPZ + ".tmp.npz")
        np.savez_compressed(tmp_npz, **arrays)
        os.replace(tmp_npz, folder / ARTIFACT_NPZ)
        tmp_json = folder / (ARTIFACT_JSON + ".tmp")
        tmp_json.write_text(json.dumps(meta, indent=1, default=_json_default))
        os.replace(tmp_json, folder / ARTIFACT_JSON)
        return folder

    @staticmethod
    def exists(folder: str | Path) -> bool:
        """True if ``folder`` holds a complete measurements artifact."""
        folder = Path(folder)
        return (folder / ARTIFACT_JSON).is_file() and (folder / ARTIFACT_NPZ).is_file()

    @classmethod
    def load(cls, folder: str | Path) -> "Measurements":
        """Read an artifact written by ``save`` (numpy + json only, no Spark)."""
        folder = Path(folder)
        meta = json.loads((folder / ARTIFACT_JSON).read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{folder}: unsupported measurements format {meta.get('format_version')}")
        original = Domain.from_dict({a: int(s) for a, s in meta["original_domain"]})
        merged = Domain.from_dict({a: int(s) for a, s in meta["domain"]})
        with np.load(folder / ARTIFACT_NPZ, allow_pickle=False) as npz:
            value_maps = {a: npz[f"value_map_{j}"] for j, a in enumerate(original.attrs)}
            one_way = {a: npz[f"one_way_original_{j}"] for j, a in enumerate(original.attrs)}
            marginals = [NoisyMarginal(tuple(m["attrs"]), npz[m["array"]], float(m["sigma"]), float(m["rho"]))
                         for m in meta["marginals"]]
        return cls(run_id=meta["run_id"], schema_hash=meta["schema_hash"], original_domain=original,
                   domain=merged, value_maps=value_maps, one_way_original=one_way,
                   noisy_total=float(meta["noisy_total"]), marginals=marginals, ledger=meta["ledger"],
                   rho=float(meta["rho"]), epsilon=meta["epsilon"], delta=meta["delta"],
                   selected_pairs=[tuple(p) for p in meta.get("selected_pairs", [])])

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


def _json_default(obj: object) -> object:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, set)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
