"""The Python API: ``PrivSyn(schema, epsilon, ...)`` -> ``plan()`` -> ``fit(df)`` -> ``model.sample(n)``.

``fit`` is the only step that reads private data, and it spends the budget once (through the
ledger's reservation, :mod:`privsyn_spark.budget.release_guard`); ``plan``, ``sample``, ``save`` and ``load``
read only the public schema or the persisted measurements. The CLI's steps call the same stage
functions (:mod:`privsyn_spark.pipeline`). A session on the bundled sample (no ledger, a local
SparkSession; about a minute on a laptop):

>>> import pandas as pd
>>> from privsyn_spark import PrivSyn, Schema, SAMPLE_DATA, SAMPLE_SCHEMA
>>> schema = Schema.load(SAMPLE_SCHEMA)
>>> synth = PrivSyn(schema, epsilon=2.0, no_ledger=True, runs_dir=str(tmp / "runs"), run_id="doc")
>>> synth.plan().rho > 0
True
>>> real = pd.read_csv(SAMPLE_DATA, nrows=3000)          # or a Spark DataFrame: spark.read.csv(...)
>>> model = synth.fit(real)                              # pandas in: a local SparkSession underneath
>>> saved = model.save(str(tmp / "model"))
>>> again = PrivSyn.load(str(tmp / "model"))
>>> out = again.sample(500, seed=0)                     # a Spark DataFrame with the schema's types
>>> out.count(), out.columns == list(schema.names)
(500, True)
>>> model.sample_pandas(500, seed=0).equals(out.toPandas())
True
>>> report = evaluate(real, out, schema)                # NOT private: compares with the real table
>>> 0 <= report.metrics["tvd"]["tvd_2way_mean"] <= 1, "<html" in report.to_html(tmp / "report.html")
(True, True)
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_spark.config import OutputConfig, Settings, ShardingConfig
from privsyn_spark.errors import UsageError
from privsyn_spark.evaluate.report import to_jsonable
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.pipeline import DEFAULT_DELTA, RunConfig
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, Measurements
from privsyn_spark.schema.schema import Schema

log = logging.getLogger(__name__)

SAMPLE_SCHEMA = str(Path(__file__).parent / "sample" / "adult.schema.yaml")
"""The bundled Adult sample's schema file."""
SAMPLE_DATA = str(Path(__file__).parent / "sample" / "adult.csv.gz")
"""The bundled Adult sample (CSV, gzip): public data for trying things out."""

MODEL_FILE = "model.json"
TARGETS_FILE = "targets.npz"
SYNTHESIZERS = ("gum", "pgm")


@dataclass(frozen=True)
class Plan:
    """What a run would release, computed from the schema and the budget alone (no data read).

    ``releases``: (name, rho, sigma, cells) of every release fixed before selection; the selected
    marginals share ``rho_selected`` by PrivSyn Eq. 1 once selection has chosen them.

    >>> plan = PrivSyn(SAMPLE_SCHEMA, epsilon=1.0, no_ledger=True).plan()
    >>> round(plan.rho, 5), round(plan.rho_one_way / plan.rho, 2), plan.releases[0][0]
    (0.01497, 0.1, 'one_way:age')
    >>> print(plan)  # doctest: +ELLIPSIS
    budget: epsilon=1 delta=1e-09 -> rho=0.0149731 (zCDP)
    ...
    """

    epsilon: float
    delta: float
    rho: float
    rho_one_way: float
    rho_indif: float
    rho_selected: float
    releases: tuple[tuple[str, float, float, int], ...]
    attribute_cells: Mapping[str, int]
    first_pass_cells: int
    max_cells: int
    model_cells: float | None
    ledger: str | None
    dataset_id: str | None

    def __str__(self) -> str:
        lines = [f"budget: epsilon={self.epsilon:g} delta={self.delta:g} -> rho={self.rho:.6g} (zCDP)",
                 f"split: one-way {self.rho_one_way:.6g}, InDif {self.rho_indif:.6g}, selected {self.rho_selected:.6g}",
                 f"ledger: {self.ledger or 'none (nothing limits or records what this dataset spends)'}"
                 + (f", dataset {self.dataset_id}" if self.dataset_id else ""),
                 f"{'release':<32} {'rho':>12} {'sigma':>10} {'cells':>10}"]
        lines += [f"{name:<32} {rho:>12.6g} {sigma:>10.4g} {cells:>10,}" for name, rho, sigma, cells in self.releases]
        fits = "ok" if self.first_pass_cells <= self.max_cells else "ABOVE the cap: the run stops before noise"
        lines += [f"selected marginals: rho {self.rho_selected:.6g} split by PrivSyn Eq. 1 after selection",
                  f"first engine pass: {self.first_pass_cells:,} cells (cap {self.max_cells:,}: {fits})",
                  "model size: the measured marginals' junction tree within "
                  + (f"{self.model_cells:,.0f} cells (Private-PGM runs)" if self.model_cells else "no bound")]
        return "\n".join(lines)


class PrivSyn:
    """A differentially private synthesizer of one table (PrivSyn selection + GUM, or Private-PGM sampling).

    ``schema``: a :class:`Schema` or a schema file. Budget: ``epsilon`` at ``delta`` for the whole
    release. A ``ledger`` (a Delta path or table, with the dataset's budget stored by
    ``privsyn-spark budget set``) and a ``dataset_id`` are required unless ``no_ledger=True`` says
    explicitly that nothing limits or records what this dataset spends. ``run_id`` names the
    measurements (a second ``fit`` with the same id reuses them without spending); ``runs_dir`` holds
    the run's artifacts (shared storage on a cluster).

    >>> PrivSyn(SAMPLE_SCHEMA, epsilon=1.0)
    Traceback (most recent call last):
    ...
    privsyn_spark.errors.UsageError: PrivSyn needs a budget ledger (ledger=..., dataset_id=...) or no_ledger=True
    """

    def __init__(self, schema: Schema | str | Path, epsilon: float = 1.0, delta: float = DEFAULT_DELTA, *,
                 ledger: str | None = None, dataset_id: str | None = None, no_ledger: bool = False,
                 run_id: str | None = None, runs_dir: str = "runs", synthesizer: str = "gum",
                 sharding: ShardingConfig = ShardingConfig(), settings: Settings = Settings(),
                 max_cells: int = DEFAULT_MAX_CELLS, recharge: bool = False, log_exact_counts: bool = False) -> None:
        from privsyn_spark.budget.ledger_state import check_epsilon_delta
        from privsyn_spark.runtime.output_check import check_run_id

        self.schema = schema if isinstance(schema, Schema) else Schema.load(schema)
        check_epsilon_delta(epsilon, delta)
        if ledger and no_ledger:
            raise UsageError("give ledger=... or no_ledger=True, not both")
        if not ledger and not no_ledger:
            raise UsageError("PrivSyn needs a budget ledger (ledger=..., dataset_id=...) or no_ledger=True")
        if ledger and not dataset_id:
            raise UsageError("a ledger needs a dataset_id: the dataset's key in the ledger")
        if recharge and not ledger:
            raise UsageError("recharge needs a ledger")
        if synthesizer not in SYNTHESIZERS:
            raise UsageError(f"synthesizer must be one of {SYNTHESIZERS}, got {synthesizer!r}")
        if max_cells < 1:
            raise UsageError(f"max_cells must be >= 1, got {max_cells}")
        if run_id is not None:
            check_run_id(run_id)
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.ledger, self.dataset_id = ledger or None, dataset_id or None
        self.run_id, self.runs_dir = run_id, runs_dir
        self.synthesizer, self.sharding, self.settings = synthesizer, sharding, settings
        self.max_cells, self.recharge, self.log_exact_counts = max_cells, recharge, log_exact_counts

    def run_config(self, input_name: str, run_id: str | None = None) -> RunConfig:
        """The pipeline's RunConfig of this synthesizer's measure and estimate steps."""
        return RunConfig(input=input_name, schema=self.schema, output="",
                         run_id=run_id or self.run_id or uuid.uuid4().hex[:12], runs_dir=self.runs_dir,
                         epsilon=self.epsilon, delta=self.delta, synthesizer=self.synthesizer,
                         shard_rows=self.sharding.shard_rows, gum_rounds=self.sharding.gum_rounds,
                         gum_sweeps=self.sharding.gum_sweeps, dataset_id=self.dataset_id, ledger=self.ledger,
                         recharge=self.recharge, log_exact_counts=self.log_exact_counts, max_cells=self.max_cells,
                         settings=self.settings)

    def plan(self, df=None) -> Plan:
        """The dry run: rho split, sigma of every release fixed before selection, cells; reads no data.

        ``df`` (optional): the table to be fitted; only its column names are checked against the schema.
        """
        if df is not None:
            self.schema.check_table_columns(df.columns)
        from privsyn_spark.privacy.accounting import resolve_budget
        from privsyn_spark.privacy.noise import gaussian_sigma
        from privsyn_spark.select.noisy_indif import indif_noise_scale

        domain = self.schema.domain()
        rho = resolve_budget(self.epsilon, self.delta, None)[0]
        split, d = self.settings.split, len(domain)
        one_way, indif, selected = split.one_way * rho, split.indif * rho, split.selected * rho
        if d == 1:  # the same edge cases as privacy/release.py
            one_way, indif, selected = rho, 0.0, 0.0
        elif selected == 0.0:
            one_way, indif = one_way + indif, 0.0
        releases = [(f"one_way:{a}", one_way / d, gaussian_sigma(1.0, one_way / d), domain[a]) for a in domain.attrs]
        pairs = d * (d - 1) // 2
        if indif > 0:
            releases.append(("indif (all pairs; InDif scale)", indif,
                             indif_noise_scale(pairs, indif, self.settings.selection.indif_scale), pairs))
        # the engine computes the pairs and sums the 1-way tables from them (measure/engine.py's _plan)
        first = (sum(domain[a] * domain[b] for i, a in enumerate(domain.attrs) for b in domain.attrs[i + 1:])
                 if d > 1 else domain.cells(domain.attrs))
        return Plan(self.epsilon, self.delta, rho, one_way, indif, selected, tuple(releases),
                    {a: domain[a] for a in domain.attrs}, first, self.max_cells,
                    self.settings.selection.model_cells, self.ledger, self.dataset_id)

    def fit(self, df, run_id: str | None = None) -> SynthModel:
        """Measure ``df`` privately (the only read of private data; charged once) and estimate the targets.

        ``df``: a Spark DataFrame of the raw table (or a pandas DataFrame, read through a local
        SparkSession: small tables only). Returns the model: post-processing from here on.
        """
        from privsyn_spark import pipeline

        df = _spark_frame(df)
        spark = df.sparkSession
        config = self.run_config(f"DataFrame:{self.dataset_id or '-'}", run_id)
        state = pipeline.RunState(config)
        with pipeline.input_codes(spark, config, source=df) as codes:
            measurements = pipeline.measure(spark, config, state, codes)
        pipeline.check_table_size(measurements)
        targets = pipeline.estimate(measurements, config, state) if self.synthesizer == "gum" else None
        return SynthModel(measurements, self.schema, targets, self.synthesizer, self.sharding, self.settings,
                          info={"domain_handling": state.domain_handling, "estimation": state.estimation})

    @staticmethod
    def load(uri: str, spark=None) -> SynthModel:
        """A model saved by :meth:`SynthModel.save` (a local path or any Hadoop URI)."""
        return SynthModel.load(uri, spark)


@dataclass
class SynthModel:
    """The measurements of one fit (+ its consistent targets): everything ``sample`` needs, no raw data.

    ``sample`` is post-processing: it never reads the private table and never spends budget.
    """

    measurements: Measurements
    schema: Schema
    targets: dict[tuple[str, ...], np.ndarray] | None
    synthesizer: str = "gum"
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    settings: Settings = field(default_factory=Settings)
    info: dict[str, Any] = field(default_factory=dict)
    last_seed: int | None = None

    @property
    def run_id(self) -> str:
        return self.measurements.run_id

    def sample(self, rows: int | None = None, seed: int = 0, spark=None):
        """``rows`` synthetic records (default: the noisy row count) as a Spark DataFrame with the
        schema's column types. The same seed gives the same rows (whatever the session's Arrow batch
        size or parallelism). GUM runs when this is called; decoding is lazy."""
        from privsyn_spark import pipeline
        from privsyn_spark.estimate.zeroed_values import absent_values
        from privsyn_spark.privacy.table_size import default_rows
        from privsyn_spark.write.decode import decode_dataframe

        if self.schema.schema_hash() != self.measurements.schema_hash:
            raise UsageError(f"the schema is not the one run {self.run_id} was measured with")
        rows = default_rows(self.measurements) if rows is None else int(rows)
        if rows < 1:
            raise UsageError(f"rows must be >= 1, got {rows}")
        spark = spark or _session()
        config = RunConfig(input="", schema=self.schema, output="", run_id=self.run_id, seed=int(seed),
                           synthesizer=self.synthesizer, shard_rows=self.sharding.shard_rows,
                           gum_rounds=self.sharding.gum_rounds, gum_sweeps=self.sharding.gum_sweeps,
                           settings=self.settings)
        # GUM starts from independent 1-way draws here (the fitted model is not part of the saved
        # artifact), so a loaded model samples exactly what the fitted one did
        codes, info = pipeline._synthesize_codes(spark, config, self.measurements, self.targets, rows, None)
        self.info["synthesis"] = {"synthesizer": self.synthesizer, "rows": rows, "seed": int(seed), **info}
        self.last_seed = int(seed)
        return decode_dataframe(codes, self.schema, self.measurements.value_maps,
                                self.measurements.one_way_original, int(seed),
                                absent_values(self.schema, self.measurements))

    def sample_pandas(self, rows: int | None = None, seed: int = 0):
        """:meth:`sample` as a pandas DataFrame (synthetic rows only; small tables)."""
        return self.sample(rows, seed).toPandas()

    def provenance(self, seed: int | None = None) -> dict[str, str]:
        """The ``privsyn.*`` properties of a table sampled from this model (run id, epsilon, delta, rho...)."""
        from privsyn_spark.pipeline import run_properties

        seed = self.last_seed if seed is None else seed
        config = RunConfig(input="", schema="", output="", run_id=self.run_id, synthesizer=self.synthesizer,
                           seed=0 if seed is None else seed)
        return run_properties(config, self.measurements)

    def save(self, uri: str, spark=None) -> str:
        """Write the measurements artifact, the targets and the model's settings under ``uri`` (a
        folder: local path or Hadoop URI); nothing is spent. Returns ``uri``."""
        from privsyn_spark.runtime.storage import join, storage_for

        storage = storage_for(uri, spark or _active())
        storage.write(join(uri, ARTIFACT_FILE), self.measurements.to_bytes())
        keys = list(self.targets or {})
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{f"t{i}": self.targets[k] for i, k in enumerate(keys)})
        storage.write(join(uri, TARGETS_FILE), buffer.getvalue())
        doc = {"run_id": self.run_id, "schema": self.schema.to_document(), "synthesizer": self.synthesizer,
               "sharding": self.sharding.__dict__, "settings": self.settings.to_dict(),
               "targets": None if self.targets is None else [list(k) for k in keys], "info": self.info}
        storage.write(join(uri, MODEL_FILE), json.dumps(to_jsonable(doc)).encode("utf-8"))
        return uri

    @classmethod
    def load(cls, uri: str, spark=None) -> SynthModel:
        """The model :meth:`save` wrote (see :meth:`PrivSyn.load`)."""
        from privsyn_spark.runtime.storage import join, storage_for

        storage = storage_for(uri, spark or _active())
        if not storage.exists(join(uri, MODEL_FILE)):
            raise UsageError(f"{uri} holds no saved privsyn-spark model ({MODEL_FILE} is missing)")
        doc = json.loads(storage.read(join(uri, MODEL_FILE)).decode("utf-8"))
        measurements = Measurements.from_bytes(storage.read(join(uri, ARTIFACT_FILE)))
        targets = None
        if doc["targets"] is not None:
            with np.load(io.BytesIO(storage.read(join(uri, TARGETS_FILE))), allow_pickle=False) as arrays:
                targets = {tuple(k): arrays[f"t{i}"] for i, k in enumerate(doc["targets"])}
        return cls(measurements, Schema.from_dict(doc["schema"]), targets, doc["synthesizer"],
                   ShardingConfig(**doc["sharding"]), Settings.from_dict(doc["settings"]), doc.get("info", {}))


def write_delta(df, target: str, provenance: SynthModel | Mapping[str, str] | None = None,
                output: OutputConfig = OutputConfig()) -> int:
    """Write a synthetic DataFrame as a Delta table (path or catalog name) in one commit; returns its
    version. ``provenance`` (the model it was sampled from, or its ``provenance()`` dict) becomes the
    table's ``privsyn.*`` properties and the commit's userMetadata."""
    from privsyn_spark.write.delta_output import write_delta as write

    props = provenance.provenance() if isinstance(provenance, SynthModel) else dict(provenance or {})
    reserved = [k for k in output.properties if k.startswith("privsyn.")]
    if reserved:
        raise UsageError(f"table properties {reserved}: privsyn.* properties record the run and are set by "
                         f"privsyn-spark itself")
    return write(df, target, output.mode, properties={**output.properties, **props}, user_metadata=props,
                 partition_by=output.partition_by, comment=output.comment)


@dataclass
class Report:
    """Fidelity metrics of a synthetic table against the real one. NOT differentially private."""

    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.metrics

    def to_html(self, path: str | Path | None = None) -> str:
        """The report as one HTML page (written to ``path`` when given)."""
        from privsyn_spark.evaluate.report import render_html, to_jsonable

        text = render_html(to_jsonable({"metrics": self.metrics}))
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def evaluate(real, synthetic, schema: Schema | str, label: str | None = None, seed: int = 0) -> Report:
    """Compare ``synthetic`` with ``real`` (Spark or pandas DataFrames of ``schema``): TVD, range
    queries, a privacy smoke check and, with ``label``, ML efficacy. Reads the private table: the
    result is NOT differentially private (an operator's check, not something to publish)."""
    from privsyn_spark.evaluate.evaluation import evaluate as evaluate_tables

    schema = schema if isinstance(schema, Schema) else Schema.load(schema)
    real, synthetic = _spark_frame(real), _spark_frame(synthetic)
    return Report(evaluate_tables(real.sparkSession, real, synthetic, schema, label=label, seed=seed))


def _active():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _session():
    """The active SparkSession as it is, or a local one (``getOrCreate``; nothing reconfigured)."""
    from privsyn_spark.runtime.session import build_spark_session

    return _active() or build_spark_session(delta=False)


def _spark_frame(df):
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


__all__ = ["PrivSyn", "SynthModel", "Plan", "Report", "evaluate", "write_delta", "SAMPLE_SCHEMA", "SAMPLE_DATA"]
