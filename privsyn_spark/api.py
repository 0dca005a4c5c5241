"""The Python API: ``PrivSyn(schema, epsilon, ...)`` -> ``plan()`` -> ``fit(df)`` -> ``model.sample(n)``.

``fit`` is the only step that reads private data, and it spends the budget once (through the
ledger's reservation, :mod:`privsyn_spark.release.guard`); ``plan``, ``sample``, ``save`` and ``load``
read only the public schema or the persisted measurements. The CLI's steps, the jobs and the Airflow
DAG are calls of this API (:mod:`privsyn_spark.cli.pipeline`). A session on the bundled sample (no
ledger, a local SparkSession; about a minute on a laptop):

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

import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from privsyn_spark.config import DEFAULT_DELTA, DEFAULT_EPSILON, OutputConfig, Settings, SynthOptions, as_output
from privsyn_spark.errors import UsageError
from privsyn_spark.evaluate.api_report import Report, evaluate
from privsyn_spark.measure.bounding import check_id_columns
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.people_model import PeopleModel, load_people, measure_people_run
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.release.artifact import committed_measurements, local_artifact
from privsyn_spark.release.guard import Draw, guarded_run
from privsyn_spark.release.identity import Charge, check_same_run, run_fingerprint
from privsyn_spark.release.plan import Plan, plan_release
from privsyn_spark.release.table_run import measure_table_run
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.input_identity import delta_version, files_version
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import input_version
from privsyn_spark.runtime.output_check import check_output_table
from privsyn_spark.runtime.preflight import check_delta, preflight
from privsyn_spark.runtime.runs_location import check_default_runs_dir
from privsyn_spark.schema.people import PeopleSpec
from privsyn_spark.schema.schema import Schema
from privsyn_spark.synth_model import SynthModel, _active, _session, _spark_frame
from privsyn_spark.write.decode import output_ddl
from privsyn_spark.write.delta_output import check_mode, partition_column_types, table_exists
from privsyn_spark.write.delta_output import write_delta as write

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from privsyn_spark.privacy.measurements import Measurements

    Frame: TypeAlias = DataFrame | pd.DataFrame
    Data: TypeAlias = DataFrame | pd.DataFrame | str | InputCodes

SAMPLE_SCHEMA = str(Path(__file__).parent / "sample" / "adult.schema.yaml")
"""The bundled Adult sample's schema file."""
SAMPLE_DATA = str(Path(__file__).parent / "sample" / "adult.csv.gz")
"""The bundled Adult sample (CSV, gzip): public data for trying things out."""
REUSE = ("check", "force")
"""``fit(..., reuse=...)``: refuse a run id measured on another input, or reuse its measurements anyway."""


class PrivSyn:
    """A differentially private synthesizer of one table (PrivSyn selection + GUM, or Private-PGM sampling).

    ``schema``: a :class:`Schema`, a schema file or its document as a dict. Budget: ``epsilon`` at
    ``delta`` for the whole release. A ``ledger`` (a Delta path or table, with the dataset's budget
    stored by ``privsyn-spark budget set``) and a ``dataset_id`` are required unless ``no_ledger=True``
    says explicitly that nothing limits or records what this dataset spends. ``run_id`` names the
    measurements (a second ``fit`` with the same id reuses them without spending); ``runs_dir`` holds
    the run's artifacts (required on a cluster: shared storage; default ``./runs`` on a local master).
    ``settings``: every other knob (one home: :class:`Settings`, or a dict of its sections as in the
    YAML file), kept as given. ``recharge``: a run id whose reserved measurements are lost pays for
    fresh ones; ``log_exact_counts``: operators only. Everything is checked before Spark starts, once, in
    :class:`~privsyn_spark.config.SynthOptions` (the arguments as one object; the CLI builds one and
    hands it to :meth:`from_options`).
    ``privacy_id`` (a column or columns) makes a person, not a row, the privacy unit: each id keeps at
    most ``max_rows_per_id`` of its rows, chosen at random, and every sensitivity is that bound
    (default: the schema's ``privacy_unit:``, else one row; docs/privacy-unit.md). ``people`` (a
    :class:`PeopleSpec` or its dict; default: the schema's ``people:``) reads the table as people and their
    rows (docs/people.md): its id must be the privacy id.

    >>> PrivSyn(SAMPLE_SCHEMA, epsilon=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privsyn_spark.errors.UsageError: a run needs a budget ledger: --ledger L --dataset-id ID (ledger=..., ...
    """

    def __init__(self, schema: Schema | str | Path | Mapping[str, Any], epsilon: float = DEFAULT_EPSILON,
                 delta: float = DEFAULT_DELTA, *,
                 ledger: str | None = None, dataset_id: str | None = None, no_ledger: bool = False,
                 run_id: str | None = None, runs_dir: str | None = None, synthesizer: str = "gum",
                 settings: Settings | Mapping[str, Any] = Settings(), max_cells: int = DEFAULT_MAX_CELLS,
                 recharge: bool = False,
                 log_exact_counts: bool = False, privacy_id: str | tuple[str, ...] | None = None,
                 max_rows_per_id: int | None = None,
                 people: PeopleSpec | Mapping[str, Any] | None = None) -> None:
        self._take(SynthOptions(schema, epsilon, delta, ledger=ledger, dataset_id=dataset_id, no_ledger=no_ledger,
                                run_id=run_id, runs_dir=runs_dir, synthesizer=synthesizer,
                                settings=cast(Settings, settings),  # a dict: checked into Settings there
                                max_cells=max_cells, recharge=recharge, log_exact_counts=log_exact_counts,
                                privacy_id=privacy_id, max_rows_per_id=max_rows_per_id, people=people))

    @classmethod
    def from_options(cls, options: SynthOptions) -> PrivSyn:
        """The synthesizer of ``options`` (already checked: nothing is checked or resolved again)."""
        synth = cls.__new__(cls)
        synth._take(options)
        return synth

    def _take(self, options: SynthOptions) -> None:
        """Adopt ``options`` (checked in :class:`SynthOptions`) as this synthesizer's."""
        self.options = options
        self.schema, self.budget = options.resolved, options.budget
        self.epsilon, self.delta = options.epsilon, options.delta
        self.ledger, self.dataset_id = options.ledger, options.dataset_id
        self.run_id, self.runs_dir = options.run_id, options.runs_location
        self.runs_dir_given = options.runs_dir is not None  # the default ./runs is refused on a cluster
        self.synthesizer, self.settings = options.synthesizer, options.settings
        self.max_cells, self.recharge, self.log_exact_counts = options.max_cells, options.recharge, \
            options.log_exact_counts

    @property
    def unit(self) -> PrivacyUnit:
        """The privacy unit of this synthesizer's releases (and its bound K)."""
        return self.options.unit

    def plan(self, df: Frame | None = None) -> Plan:
        """The dry run: rho split, sigma of every release fixed before selection, cells; reads no data.

        ``df`` (optional): the table to be fitted; only its column names are checked against the schema.
        """
        if df is not None:
            self.schema.check_table_columns(df.columns)
            check_id_columns(self.unit, list(df.columns), self.schema.names)
        return plan_release(self.schema, self.budget, self.settings, self.max_cells, self.ledger,
                            self.dataset_id)

    def fingerprint(self, source: str | None, spark: SparkSession | None = None, input_format: str | None = None,
                    table: str | None = None, partition_files: list[str] | None = None) -> dict[str, Any]:
        """What a run id of this synthesizer on the input ``source`` (its identity:
        :mod:`~privsyn_spark.runtime.input_identity`; None: any) is bound to (a reuse must match); with
        ``spark`` and the input's location ``table``, also the version of its files (a changed CSV/Parquet
        input is a new run) or its Delta version (recorded; a reuse on another version is warned about);
        ``partition_files`` (a scoped run's: :class:`InputCodes`) take their place: a changed partition is
        a new run, a change elsewhere in the table is not."""
        files = (files_version(partition_files) if partition_files is not None
                 else input_version(spark, table, input_format) if spark is not None and table else None)
        version = delta_version(spark, table) if spark is not None and table and files is None else None
        return run_fingerprint(self.epsilon, self.delta, self.schema.schema_hash(), source, self.settings, files,
                               version)

    def check_reuse(self, run_id: str, source: str | None) -> None:
        """Refuse (UsageError), before Spark starts, a run id whose local artifact was measured with other
        settings or input ``source`` (None: any input; a runs dir on another file system is checked when the
        run reads it)."""
        if "://" in self.runs_dir:
            return
        found = local_artifact(self.runs_dir, run_id, skip_unreadable=bool(self.ledger))  # else: the ledger judges
        if found is not None:
            check_same_run(found, self.fingerprint(source), run_id)

    def charge(self, run_id: str, partition: Mapping[str, str] | None = None) -> Charge:
        """The ledger's view of run ``run_id`` (scoped to ``partition``): where its artifact goes and what
        it is charged."""
        return Charge(run_id, self.runs_dir, self.epsilon, self.delta, self.ledger, self.dataset_id, self.recharge,
                       self.unit, tuple(sorted((partition or {}).items())), self.budget.rho)

    def release(self, run_id: str, partition: Mapping[str, str] | None = None) -> Charge:
        """Deprecated name of :meth:`charge`."""
        warnings.warn("PrivSyn.release is deprecated, use PrivSyn.charge", DeprecationWarning, stacklevel=2)
        return self.charge(run_id, partition)

    def run_folder(self, run_id: str, spark: SparkSession | None = None) -> RunArtifacts:
        """The artifacts of run ``run_id`` under ``runs_dir`` (a URI needs the session's file system; the
        default ``./runs`` is refused on a session whose master is not local)."""
        if spark is not None and not self.runs_dir_given:
            check_default_runs_dir(spark)
        return RunArtifacts(self.runs_dir, run_id, spark or (_active() if "://" in self.runs_dir else None))

    def open(self, source: str | Frame, input_format: str | None = None, run_id: str | None = None,
             spark: SparkSession | None = None, scope: Scope | None = None) -> InputCodes:
        """The input (a table location read with ``input_format``, or a Spark DataFrame), read and
        encoded at most once: pass it to :meth:`fit` / :meth:`measure` and to :func:`evaluate`. Its
        scratch table under ``<run>/scratch`` is deleted when the returned context manager exits.
        ``scope``: the run's partition values and predicate (:mod:`privsyn_spark.runtime.input_scope`;
        with a DataFrame, ``fit(df.where(...))`` does the same)."""
        source = source if isinstance(source, str) else _spark_frame(source)
        spark = spark or (_session() if isinstance(source, str) else source.sparkSession)
        run_id = run_id or self.run_id or f"scratch-{uuid.uuid4().hex[:12]}"
        scratch = self.run_folder(run_id, spark).location("scratch")  # a refused runs dir: before any job
        preflight(spark, needs_delta=f"the budget ledger {self.ledger}" if self.ledger else None)
        return InputCodes(spark, source, input_format, self.schema, scratch, scope)

    def measure(self, data: Data, run_id: str | None = None, input_format: str | None = None,
                reuse: str = "check") -> SynthModel:
        """Measure ``data`` privately: the only read of private data, charged once per run id (the
        ledger's reservation, :mod:`privsyn_spark.release.guard`); a run id measured before on the same
        input is reused without spending. ``data``: a Spark or pandas DataFrame, a table location, or
        :meth:`open`'s input. The targets are estimated on the model's first sample (or by :meth:`fit`).
        A run id measured on another input (another location, or a DataFrame of another plan:
        :mod:`~privsyn_spark.runtime.input_identity`) is refused unless ``reuse="force"``."""
        if reuse not in REUSE:
            raise UsageError(f"reuse must be one of {REUSE}, got {reuse!r}")
        if self.schema.people is not None:
            raise UsageError("a schema with people is measured by measure_people() (or fit()), which returns its "
                             "PeopleModel")
        return measure_table_run(self, data, run_id, input_format, reuse)

    def guarded(self, codes: InputCodes, charge: Charge, draw: Draw, reuse: str, record: RunRecord,
                drawn: list) -> tuple[Measurements, RunRecord]:
        """The measurements of the input ``codes`` for ``release`` and the run's record
        (:func:`~privsyn_spark.release.guard.guarded_run`)."""
        return guarded_run(self, codes, charge, draw, reuse, record, drawn)

    def measure_people(self, data: Data, run_id: str | None = None, input_format: str | None = None,
                       reuse: str = "check", parents: Frame | str | None = None) -> PeopleModel:
        """:meth:`measure` of a schema with a ``people:`` section (docs/people.md): the person table, the
        degree histogram and the row table, under one reservation; ``data``: a DataFrame or a table location
        (the child table in the parent-child form, ``parents`` the parent table, read like ``data``)."""
        if reuse not in REUSE:
            raise UsageError(f"reuse must be one of {REUSE}, got {reuse!r}")
        if self.schema.people is None:
            raise UsageError("measure_people() needs a schema with a people: section (or PrivSyn(people=...))")
        if parents is not None:
            data, parents = (t if isinstance(t, str) else _spark_frame(t) for t in (data, parents))
        return measure_people_run(self, data, run_id, input_format, reuse, parents)

    def fit(self, data: Data, run_id: str | None = None, input_format: str | None = None,
            reuse: str = "check", parents: Frame | str | None = None) -> SynthModel | PeopleModel:
        """:meth:`measure` (:meth:`measure_people` with people: a :class:`PeopleModel`), then estimate the
        targets (and the Private-PGM model): post-processing from here on.

        ``data``: a Spark DataFrame of the raw table (or a pandas DataFrame, read through a local
        SparkSession: small tables only; or a table location, or :meth:`open`'s input). ``reuse``:
        ``"check"`` refuses a run id measured on another input, ``"force"`` reuses its measurements anyway.
        ``parents``: the parent table of a people schema's parent-child form (``data`` is then the child).
        """
        if self.schema.people is not None:
            return self.measure_people(data, run_id, input_format, reuse, parents).estimate()
        if parents is not None:
            raise UsageError("parents=... needs a people section with form: parent_child")
        return self.measure(data, run_id, input_format, reuse).estimate()

    def measured(self, run_id: str | None = None, source: str | None = None,
                 spark: SparkSession | None = None) -> SynthModel:
        """The model of a run measured earlier (another step or process): with a ledger its committed,
        hash-checked artifact; refused if it was measured with other settings or input ``source``."""
        run_id = run_id or self.run_id
        if not run_id:
            raise UsageError("measured() needs the run id of the measurements")
        spark = spark or _session()
        folder = self.run_folder(run_id, spark)
        fingerprint = self.fingerprint(source)
        measurements = committed_measurements(spark, self.charge(run_id), fingerprint)
        return self._model(measurements, RunRecord.from_state(folder.read_state()), folder)

    def check_output(self, target: str, output: OutputConfig | Mapping[str, Any] = OutputConfig(),
                     spark: SparkSession | None = None) -> None:
        """Refuse (UsageError) an output the write would fail on: a file, a non-Delta folder, a table
        of another schema in append mode, a table (partition) holding rows in mode ``error`` (the
        default). Call it before :meth:`fit` spends anything."""
        output = as_output(output)  # an append into a scoped partition is refused there
        spark = spark or _session()
        ddl = output_ddl(self.schema)
        check_mode(spark, target, output.mode, output.partition, output.partition_types)
        if output.partition:  # a replaceWhere writes into the table as it is: its columns must match, as appending
            types = partition_column_types(spark, target if table_exists(spark, target) else None,
                                           output.partition, output.partition_types)
            ddl += "".join(f", `{c}` {types[c]}" for c, _ in output.partition)
        check_output_table(spark, target, "append" if output.partition else output.mode, ddl)

    @staticmethod
    def load(uri: str, spark: SparkSession | None = None) -> SynthModel | PeopleModel:
        """A model saved by :meth:`SynthModel.save` or :meth:`PeopleModel.save` (a local path or any Hadoop URI)."""
        return load_people(uri, spark) or SynthModel.load(uri, spark)

    def _model(self, measurements: Measurements, record: RunRecord, folder: RunArtifacts) -> SynthModel:
        return SynthModel(measurements, self.schema, synthesizer=self.synthesizer, settings=self.settings,
                          record=record, run_folder=folder)


def write_delta(df: DataFrame, target: str, provenance: SynthModel | Mapping[str, str] | None = None,
                output: OutputConfig | Mapping[str, Any] = OutputConfig()) -> int:
    """Write a synthetic DataFrame as a Delta table (path or catalog name) in one commit; returns its
    version. ``provenance`` (the model it was sampled from, or its ``provenance()`` dict) becomes the
    table's ``privsyn.*`` properties and the commit's userMetadata; ``output``: an :class:`OutputConfig`
    or a dict of its fields."""
    output = as_output(output)  # refuses privsyn.* and Spark's reserved properties
    check_delta(df.sparkSession, f"the output {target}")
    props = provenance.provenance() if isinstance(provenance, SynthModel) else dict(provenance or {})
    if output.partition:
        props = {**props, "privsyn.partition": ",".join(f"{c}={v}" for c, v in output.partition)}
    return write(df, target, output.mode, properties={**output.properties, **props}, user_metadata=props,
                 partition_by=output.partition_by, comment=output.comment, partition=output.partition,
                 partition_types=output.partition_types)


__all__ = ["PrivSyn", "SynthModel", "Plan", "Report", "evaluate", "write_delta", "SAMPLE_SCHEMA", "SAMPLE_DATA"]
