"""A run's artifact folder ``<runs-dir>/<run-id>/`` on any storage (see :mod:`privsyn_spark.runtime.storage`).

Three parts, kept apart (``README.txt`` in the folder says which is which: :data:`RUN_FOLDER_NOTE`):

- ``release/``: what may be handed on, the run's model as :meth:`SynthModel.save
  <privsyn_spark.SynthModel.save>` writes it (noisy measurements, their post-processing, nothing exact);
- ``operator/``: what is NOT private, for operators only: ``state.json`` (what the steps found: exact
  tallies, timings) and the run report ``report.json`` / ``report.html`` (exact statistics);
- the run's working state: ``measurements/measurements.npz`` (written once, atomically, before anything
  derived from it leaves the process), ``targets/`` (consistent target marginals, the graphical model),
  and while a run is alive the private-row ``scratch/`` and GUM's ``checkpoints/``.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.junction_tree import JunctionTree
from privsyn_spark.estimate.model import GraphicalModel
from privsyn_spark.evaluate.report import REPORT_HTML, REPORT_JSON, render_html, report_json
from privsyn_spark.privacy.measurements import ARTIFACT_FILE
from privsyn_spark.run_record import STATE_FILE
from privsyn_spark.runtime.storage import Storage, join, storage_for

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

RELEASE_DIR = "release"
OPERATOR_DIR = "operator"
NOTE_FILE = "README.txt"
RUN_FOLDER_NOTE = """\
privsyn-spark run folder.

release/     MAY BE HANDED ON: the run's saved model (noisy measurements, consistent targets, the
             fitted model, settings). Differentially private at the run's (epsilon, delta); load it
             with PrivSyn.load("<this folder>/release").
operator/    OPERATORS ONLY, NOT private: state.json (exact out-of-domain, null and not-a-number
             tallies, bounding tallies, timings), report.json / report.html (exact statistics of the
             private table: fidelity metrics, ML split sizes, real values of numeric columns).
all else     the run's working state, not to be handed on: measurements/ and targets/ (working copies:
             hand on release/ instead), scratch/ and checkpoints/ (packed codes of private rows while
             a run is alive).
"""
"""What ``README.txt`` in every run folder says: which part may be handed on."""


class RunArtifacts:
    """Locations and reads/writes of one run's artifacts (``runs_dir`` a local path or a URI)."""

    def __init__(self, runs_dir: str, run_id: str | None, spark: SparkSession | None = None) -> None:
        if not runs_dir or not str(runs_dir).strip():
            raise UsageError("--runs-dir must name a folder or a URI (shared storage on a cluster)")
        self.base = join(str(runs_dir), run_id) if run_id is not None else str(runs_dir)
        self.spark = spark
        self.storage: Storage = storage_for(self.base, spark)

    @classmethod
    def folder(cls, location: str, spark: SparkSession | None = None) -> RunArtifacts:
        """The same layout in the folder ``location`` itself (a saved :class:`~privsyn_spark.SynthModel`)."""
        return cls(location, None, spark)

    def location(self, *parts: str) -> str:
        """``<run folder>/<parts...>`` as a path or URI."""
        return join(self.base, *parts)

    @property
    def measurements(self) -> str:
        """Where this run's measurements artifact lives."""
        return self.location("measurements", ARTIFACT_FILE)

    @property
    def release(self) -> str:
        """``release/``: what may be handed on (the run's saved model)."""
        return self.location(RELEASE_DIR)

    def write_state(self, doc: Any) -> str:
        """``operator/state.json``: what the steps found (exact tallies, timings; operators only)."""
        return self.write_json(doc, OPERATOR_DIR, STATE_FILE)

    def read_state(self) -> Any:
        """What :meth:`write_state` wrote (or, in a run folder of a version before ``operator/``, the
        top-level ``state.json``); None when neither is there."""
        doc = self.read_json(OPERATOR_DIR, STATE_FILE)
        return self.read_json(STATE_FILE) if doc is None else doc

    def write_note(self) -> None:
        """``README.txt``: which part of the run folder may be handed on (written once)."""
        if not self.storage.exists(self.location(NOTE_FILE)):
            self.write(RUN_FOLDER_NOTE.encode("utf-8"), NOTE_FILE)

    @property
    def checkpoints(self) -> str:
        """GUM's reliable checkpoints under the run folder."""
        return self.location("checkpoints")

    def read(self, *parts: str) -> bytes | None:
        """The bytes of ``parts`` under the run folder, or None when missing."""
        location = self.location(*parts)
        return self.storage.read(location) if self.storage.exists(location) else None

    def _required(self, *parts: str) -> bytes:
        """The bytes of ``parts`` under the run folder; UsageError when missing (a run folder cut short)."""
        data = self.read(*parts)
        if data is None:
            raise UsageError(f"{self.location(*parts)} is missing: the run folder is incomplete")
        return data

    def write(self, data: bytes, *parts: str, overwrite: bool = True) -> str:
        """Write ``data`` atomically under the run folder; returns its location."""
        location = self.location(*parts)
        self.storage.write(location, data, overwrite=overwrite)
        return location

    def read_json(self, *parts: str) -> Any:
        data = self.read(*parts)
        return None if data is None else json.loads(data.decode("utf-8"))

    def write_json(self, doc: Any, *parts: str) -> str:
        return self.write(json.dumps(doc, default=str).encode("utf-8"), *parts)

    def save_targets(self, run_id: str, tables: Mapping[tuple[str, ...], np.ndarray], meta: dict) -> None:
        """Target tables (npz) and their description (json, written last: it marks completeness)."""
        keys = list(tables)
        buffer = io.BytesIO()
        arrays: dict[str, Any] = {f"t{i}": tables[k] for i, k in enumerate(keys)}
        np.savez_compressed(buffer, **arrays)
        self.write(buffer.getvalue(), "targets", "targets.npz")
        self.write_json({"run_id": run_id, "keys": [list(k) for k in keys], **meta}, "targets", "targets.json")

    def save_model(self, run_id: str, model: Any) -> None:
        """The fitted graphical model (potentials npz, tree json); call before :meth:`save_targets`."""
        cliques = list(model.potentials)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{f"p{i}": model.potentials[c] for i, c in enumerate(cliques)})
        self.write(buffer.getvalue(), "targets", "model.npz")
        tree = model.tree
        self.write_json({"run_id": run_id, "total": model.total, "potentials": [list(c) for c in cliques],
                         "cliques": [list(c) for c in tree.cliques], "edges": [list(e) for e in tree.edges],
                         "order": list(tree.order)}, "targets", "model.json")

    def load_model(self, run_id: str, domain: Any) -> Any:
        """The graphical model saved for ``run_id`` over ``domain``, or None."""
        doc = self.read_json("targets", "model.json")
        if doc is None or doc.get("run_id") != run_id:
            return None
        tree = JunctionTree(domain, tuple(tuple(c) for c in doc["cliques"]), tuple(tuple(e) for e in doc["edges"]),
                            tuple(doc["order"]))
        arrays = self._saved_arrays("targets", "model.npz")
        if arrays is None:
            return None
        potentials = {tuple(c): arrays[f"p{i}"] for i, c in enumerate(doc["potentials"])}
        return GraphicalModel(domain, tree, potentials, doc["total"])

    def load_targets(self, run_id: str) -> Any:
        """``(tables, meta)`` saved for ``run_id``, or None."""
        doc = self.read_json("targets", "targets.json")
        if doc is None or doc.get("run_id") != run_id:
            return None
        arrays = self._saved_arrays("targets", "targets.npz")
        if arrays is None:
            return None
        tables = {tuple(k): arrays[f"t{i}"] for i, k in enumerate(doc.pop("keys"))}
        doc.pop("run_id")
        return tables, doc

    def _saved_arrays(self, *parts: str) -> dict[str, np.ndarray] | None:
        """The arrays of an ``.npz`` the estimate step saved; None, with a warning, when it cannot be read
        (truncated or damaged: the caller estimates it again from the measurements)."""
        data = self._required(*parts)
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                return {name: arrays[name] for name in arrays.files}
        except Exception as err:  # noqa: BLE001 - a zip, zlib or format error of damaged bytes
            log.warning("%s cannot be read (%s): re-estimating it from the measurements", self.location(*parts),
                        type(err).__name__)
            return None

    def write_report(self, report: Mapping) -> str:
        """``operator/report.json`` and ``operator/report.html`` (exact statistics: operators only);
        returns the HTML's location."""
        text = report_json(report)
        self.write(text.encode("utf-8"), OPERATOR_DIR, REPORT_JSON)
        return self.write(render_html(json.loads(text)).encode("utf-8"), OPERATOR_DIR, REPORT_HTML)
