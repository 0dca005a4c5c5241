"""A fitted synthesizer: the measurements of one fit, their consistent targets and the graphical
model estimation fitted; everything ``sample`` needs, no raw data. Post-processing only: nothing
here reads the private table or spends budget.

A saved model is a folder with the run folder's layout (:mod:`privsyn_spark.run_artifacts`):
``measurements/measurements.npz``, ``targets/`` (targets, and the Private-PGM model when one was
fitted) and ``model.json`` (schema, synthesizer, settings, what the steps found that is releasable:
never the domain policies' exact tallies nor the timings, :data:`privsyn_spark.run_record.OPERATOR_ONLY`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.config import Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.merged_shares import expansion_weights
from privsyn_spark.estimate.targets import estimate_targets, estimation_budget
from privsyn_spark.estimate.zeroed_values import absent_values
from privsyn_spark.evaluate.run_report import build_report
from privsyn_spark.jsonable import to_jsonable
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, Measurements
from privsyn_spark.privacy.policy_checks import check_policies
from privsyn_spark.privacy.table_size import check_table_size, default_rows, table_size_warnings
from privsyn_spark.progress import Progress
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.scratch import run_scratch
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.schema import Schema
from privsyn_spark.synthesize.pgm_sampling import fit_model
from privsyn_spark.synthesize.records import synthesize_codes
from privsyn_spark.version import __version__
from privsyn_spark.write.decode import decode_dataframe

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from privsyn_spark.estimate.model import GraphicalModel

log = logging.getLogger(__name__)

MODEL_FILE = "model.json"


@dataclass
class SynthModel:
    """The measurements of one fit (+ its targets and graphical model): see the module docstring.

    ``targets``/``model`` are estimated once (:meth:`estimate`, on the first :meth:`sample` when
    :meth:`~privsyn_spark.PrivSyn.measure` did not) and reused by every later sample; ``run_folder``
    is where a fit keeps them (None for a loaded model: they came with it).
    """

    measurements: Measurements
    schema: Schema
    targets: dict[tuple[str, ...], np.ndarray] | None = None
    synthesizer: str = "gum"
    settings: Settings = field(default_factory=Settings)
    record: RunRecord = field(default_factory=RunRecord)
    model: GraphicalModel | None = field(default=None, repr=False)
    """The graphical model estimation fitted (Private-PGM), or None (the consistency fallback)."""
    last_seed: int | None = None
    run_folder: RunArtifacts | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.measurements.run_id

    def estimate(self) -> SynthModel:
        """Consistent targets for GUM and the graphical model (Private-PGM, or PrivSyn's consistency
        fallback), once: kept in the run folder (a later step reuses them). Stops (BadInputData) when
        a ``fail`` policy's noisy check failed or the noisy total cannot be told from 0. Returns the model itself."""
        if self.targets is not None:
            return self
        check_policies(self.measurements.policy_checks)
        check_table_size(self.measurements)
        for warning in table_size_warnings(self.measurements):
            log.warning("%s", warning)
        folder, domain = self.run_folder, self.measurements.domain
        if folder is not None and (cached := folder.load_targets(self.run_id)) is not None:
            pgm = cached[1].get("method") == "pgm"
            model = folder.load_model(self.run_id, domain) if pgm else None
            if model is not None or not pgm:  # else the saved model cannot be read: estimated again below
                (self.targets, self.record.estimation), self.model = cached, model
                return self
        with self.record.step("estimate"):
            selection, estimation = self.settings.selection, self.settings.estimation
            targets, self.record.estimation, model = estimate_targets(
                self.measurements, self.schema, model_cells=selection.model_cells, estimator=estimation.estimator,
                consistency_iters=estimation.consistency_iters, pair_target_work=estimation.pair_target_work,
                progress=Progress(self.settings.progress))
            if model is not None and folder is not None:  # the saved model, as a later step reads it
                folder.save_model(self.run_id, model)
                model = folder.load_model(self.run_id, domain)
            if folder is not None:
                folder.save_targets(self.run_id, targets, self.record.estimation)
            self.targets, self.model = targets, model
        return self

    def sample(self, rows: int | None = None, seed: int = 0, spark: SparkSession | None = None,
               checkpoint_dir: str | None = None) -> DataFrame:
        """``rows`` synthetic records (default: the noisy row count) as a lazy Spark DataFrame with the
        schema's column types, from the estimated targets and model (never fitted again). The same
        seed gives the same rows (whatever the session's Arrow batch size or parallelism).
        ``checkpoint_dir``: GUM's reliable checkpoints (see :meth:`checkpoints`)."""
        if self.schema.schema_hash() != self.measurements.schema_hash:
            raise UsageError(f"the schema is not the one run {self.run_id} was measured with")
        rows = default_rows(self.measurements) if rows is None else int(rows)
        if rows < 1:
            raise UsageError(f"rows must be >= 1, got {rows}")
        spark = spark or _session()
        self.estimate()
        model = self._sampling_model()
        with self.record.step("synthesize"):
            codes, info = synthesize_codes(
                spark, self.measurements, rows, int(seed), synthesizer=self.synthesizer, targets=self.targets,
                model=model, sharding=self.settings.sharding, gum=self.settings.gum, checkpoint_dir=checkpoint_dir,
                progress=Progress(self.settings.progress))
            self.record.synthesis = {"synthesizer": self.synthesizer, "rows": rows, "seed": int(seed),
                                     **to_jsonable(info)}
            self.last_seed = int(seed)
            weights = expansion_weights(self.measurements, self.settings.estimation.shrink_merged)
            return decode_dataframe(codes, self.schema, self.measurements.value_maps, weights, int(seed),
                                    absent_values(self.schema, self.measurements))

    def _sampling_model(self) -> GraphicalModel | None:
        """The model sampling starts from; the ``pgm`` synthesizer after the consistency fallback
        fits one here, once (kept and saved with this model)."""
        if self.synthesizer == "pgm" and self.model is None:
            self.model, info = fit_model(self.measurements, estimation_budget(self.settings.selection.model_cells))
            self.record.estimation = {**self.record.estimation, "pgm_sampling_model": info}
        return self.model

    def sample_pandas(self, rows: int | None = None, seed: int = 0) -> pd.DataFrame:
        """:meth:`sample` as a pandas DataFrame (synthetic rows only; small tables)."""
        return self.sample(rows, seed).toPandas()

    @contextmanager
    def checkpoints(self, spark: SparkSession | None = None, keep: bool = False) -> Iterator[str | None]:
        """GUM's reliable checkpoint folder for :meth:`sample` (``spark.checkpoint.dir``, else the run
        folder's), deleted on exit unless ``keep``: write the sampled table inside the block."""
        if self.run_folder is None:
            yield None
            return

        with run_scratch(spark or _session(), self.run_folder.checkpoints, keep) as folder:
            yield folder

    def provenance(self, seed: int | None = None) -> dict[str, str]:
        """The ``privsyn.*`` properties of a table sampled from this model (run id, epsilon, delta, rho...)."""
        seed = self.last_seed if seed is None else seed
        m = self.measurements
        return {"privsyn.run_id": self.run_id, "privsyn.epsilon": str(m.epsilon), "privsyn.delta": str(m.delta),
                "privsyn.rho": repr(m.rho), "privsyn.schema_hash": m.schema_hash, "privsyn.version": __version__,
                "privsyn.synthesizer": self.synthesizer, "privsyn.seed": str(0 if seed is None else seed),
                **_unit_properties(m.privacy_unit)}

    def save_state(self) -> None:
        """Keep what the steps found in the run folder's ``operator/state.json`` (for a later step's report;
        operators only), and refresh the run folder's ``release/``: this model saved (:meth:`save`), the only part of
        the run folder that may be handed on (:data:`privsyn_spark.run_artifacts.RUN_FOLDER_NOTE`)."""
        if self.run_folder is not None:
            self.run_folder.write_state(self.record.to_state())
            self.save(self.run_folder.release, self.run_folder.spark)
            self.run_folder.write_note()

    def write_report(self, run: dict[str, Any]) -> dict:
        """The run report (:func:`privsyn_spark.evaluate.run_report.build_report`; ``run`` describes the
        run) written as ``operator/report.json`` / ``report.html`` into the run folder; returns it."""
        report = build_report(run, self.measurements, self.record)
        if self.run_folder is not None:
            log.info("run report: %s", self.run_folder.write_report(report))
        return report

    def save(self, uri: str, spark: SparkSession | None = None) -> str:
        """Write the measurements artifact, the targets, the Private-PGM model (when one was fitted) and
        the settings under ``uri`` (a folder: local path or Hadoop URI); nothing is spent. Returns ``uri``."""
        folder = RunArtifacts.folder(uri, spark or _active())
        folder.write(self.measurements.to_bytes(), "measurements", ARTIFACT_FILE)
        if self.model is not None:
            folder.save_model(self.run_id, self.model)
        if self.targets is not None:
            folder.save_targets(self.run_id, self.targets, self.record.estimation)
        doc = {"run_id": self.run_id, "schema": self.schema.to_document(), "synthesizer": self.synthesizer,
               "settings": self.settings.to_dict(),
               "record": self.record.releasable()}  # nothing exact of the private table
        folder.write_json(doc, MODEL_FILE)
        return uri

    @classmethod
    def load(cls, uri: str, spark: SparkSession | None = None) -> SynthModel:
        """The model :meth:`save` wrote (see :meth:`privsyn_spark.PrivSyn.load`)."""
        folder = RunArtifacts.folder(uri, spark or _active())
        doc = folder.read_json(MODEL_FILE)
        if doc is None:
            raise UsageError(f"{uri} holds no saved privsyn-spark model ({MODEL_FILE} is missing)")
        if doc.get("people"):
            raise UsageError(f"{uri} holds a people model: load it with PrivSyn.load")
        data = folder.read("measurements", ARTIFACT_FILE)
        if data is None:
            raise UsageError(f"{uri} holds no measurements (measurements/{ARTIFACT_FILE} is missing)")
        measurements = Measurements.from_bytes(data)
        record = RunRecord.from_state(doc.get("record"))
        targets = folder.load_targets(doc["run_id"])
        if targets is not None:
            targets, record.estimation = targets
        return cls(measurements, Schema.from_dict(doc["schema"]), targets, doc["synthesizer"],
                   Settings.from_dict(doc["settings"]), record,
                   model=folder.load_model(doc["run_id"], measurements.domain))


def _active() -> SparkSession | None:
    from pyspark.sql import SparkSession


    return SparkSession.getActiveSession()


def _unit_properties(unit: dict) -> dict[str, str]:
    """A person unit as table properties: its bound K, never the id column (none for a row unit)."""
    if unit.get("privacy_unit", "row") == "row":
        return {}
    return {"privsyn.privacy_unit": "person", "privsyn.max_rows_per_id": str(unit["max_rows_per_id"])}


def _session() -> SparkSession:
    """The active SparkSession as it is, or a local one (``getOrCreate``; nothing reconfigured)."""
    return _active() or build_spark_session(delta=False)


def _spark_frame(df: DataFrame | pd.DataFrame) -> DataFrame:
    """A Spark DataFrame as it is; a pandas DataFrame through the active or a local session."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        return _session().createDataFrame(df)
    if not hasattr(df, "sparkSession"):
        raise UsageError(f"expected a Spark or pandas DataFrame, got {type(df).__name__}")
    return df
