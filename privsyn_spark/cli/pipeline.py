"""The CLI's run steps (and so the jobs' and the Airflow DAG's) as calls of the public API.

A :class:`RunConfig` is what the command line (or a job) asks for; each step turns it into a
:class:`~privsyn_spark.PrivSyn` and calls it: ``measure`` -> ``PrivSyn.measure``, ``synthesize`` ->
``PrivSyn.measured`` + ``SynthModel.sample`` + ``write_delta``, ``evaluate`` -> ``evaluate`` +
``SynthModel.write_report``; ``run`` does all of it on one read of the input (a people schema's steps:
:mod:`privsyn_spark.cli.people_steps`).

Artifacts of a run live in ``<runs_dir>/<run_id>/`` (a local path or any Hadoop file system URI, see
:mod:`privsyn_spark.run_artifacts`): ``measurements/`` (the only thing read after measuring),
``targets/`` (consistent target marginals and the graphical model), ``release/`` (what may be handed
on), ``operator/`` (``state.json``, ``report.json``, ``report.html``: NOT private). Steps are
idempotent: measuring a run id again reuses its measurements and spends nothing (with a ledger,
wherever the ledger says they are: :mod:`privsyn_spark.release.guard`); synthesizing again with the
same seed rewrites the same table.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from privsyn_spark.api import PrivSyn, SynthModel, evaluate, write_delta
from privsyn_spark.cli.people_steps import check_people_outputs, measured_people, people_report, synthesize_people
from privsyn_spark.config import DEFAULT_DELTA, OutputConfig, SynthOptions
from privsyn_spark.errors import UsageError
from privsyn_spark.evaluate.report import REPORT_HTML
from privsyn_spark.people_model import PeopleModel
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.progress import summary
from privsyn_spark.run_artifacts import OPERATOR_DIR
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.locations import is_path
from privsyn_spark.runtime.storage import join
from privsyn_spark.runtime.warmup import warm_up
from privsyn_spark.schema.schema import Schema
from privsyn_spark.synthesize.sharded.spark_driver import warm_worker
from privsyn_spark.write.delta_output import check_partition_mode, warm_write

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from privsyn_spark.measure.input_codes import InputCodes

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_DELTA", "RunConfig", "measure", "run", "run_evaluate", "run_measure", "run_synthesize",
           "synthesizer"]


@dataclass(frozen=True)
class RunConfig:
    """Everything one CLI run asks for; the CLI and the Airflow DAG fill it from their arguments.

    ``synth``: the run's :class:`~privsyn_spark.PrivSyn` as one checked object (schema, budget, ledger,
    run id and folder, privacy unit, every other knob in its ``settings``: one home,
    :class:`~privsyn_spark.config.SynthOptions`); the other fields are the run's own: where it reads and
    writes, how the table is written, how many rows, the evaluation and the input's scope.
    """

    input: str                           # a table location
    output: str
    synth: SynthOptions                  # the synthesizer (its run_id is required: the CLI draws one)
    input_format: str | None = None
    synth_rows: int | None = None        # default: the noisy total
    people: int | None = None            # a people schema: synthetic persons (default: the noisy person count)
    persons_output: str = ""             # a people schema: the persons' table (their rows go to ``output``)
    parents: str = ""                    # a people schema's parent-child form: the parent table (``input``: the child)
    seed: int = 0
    write: OutputConfig = field(default_factory=OutputConfig)  # how ``output`` is written (mode, partitioning, ...)
    label: str | None = None             # label column for the ML-efficacy metric
    evaluate: bool = True
    keep_scratch: bool = False           # keep the run's checkpoint files after it ends
    scope: Scope = field(default_factory=Scope)  # --partition / --where: the input's rows this run measures

    def __post_init__(self) -> None:
        if not self.synth.run_id:
            raise UsageError("a run needs a run id (SynthOptions(run_id=...))")
        if self.synth_rows is not None and self.synth_rows < 1:  # refused before Spark starts
            raise UsageError(f"--rows must be >= 1, got {self.synth_rows}")
        if self.people is not None and self.people < 1:
            raise UsageError(f"--people must be >= 1, got {self.people}")
        check_partition_mode(self.write.mode, self.scope.partition)  # before Spark starts

    @property
    def run_id(self) -> str:
        """The run's id (``synth.run_id``)."""
        return self.synth.run_id or ""

    @property
    def source(self) -> str:
        """The input with its scope: what the run id's fingerprint binds (another partition, another run)."""
        return self.scope.describe(self.input)

    @property
    def run_location(self) -> str:
        """``<runs_dir>/<run_id>`` as an absolute path or a URI."""
        return join(self.synth.runs_location, self.run_id)

    @property
    def output_config(self) -> OutputConfig:
        """How the synthetic table is written (a scoped run: into its partition; see :func:`output_for`)."""
        return dataclasses.replace(self.write, partition=self.scope.partition)


def output_for(spark: SparkSession, config: RunConfig, codes: InputCodes | None = None) -> OutputConfig:
    """:attr:`RunConfig.output_config` with the scoped partition columns typed as the input's (its
    schema only, never its rows: from ``codes`` when the run holds them)."""
    output = config.output_config
    if not config.scope.partition:
        return output

    raw = codes.raw() if codes is not None else read_table(spark, config.input, config.input_format, infer_types=False)
    types = {f.name: f.dataType.simpleString() for f in raw.schema.fields if f.name in config.scope.columns}
    return dataclasses.replace(output, partition_types=types)


def synthesizer(config: RunConfig) -> PrivSyn:
    """The :class:`~privsyn_spark.PrivSyn` a run configuration asks for."""
    return PrivSyn.from_options(config.synth)


def measure(spark: SparkSession, config: RunConfig, codes: InputCodes | None = None) -> Measurements:
    """The run's private measurements (reused if present): :meth:`PrivSyn.measure` on the input
    (``codes``: :meth:`PrivSyn.open`'s input, kept for later steps; default: read ``config.input``)."""
    return _measure(spark, config, codes).measurements


def run_measure(spark: SparkSession, config: RunConfig) -> Measurements:
    """CLI step `measure`: budget ledger reservation, then the private measurements (reused if present); a
    people schema's: :meth:`PrivSyn.measure_people` (the person table, the degrees and the row table)."""
    synth = synthesizer(config)
    if synth.schema.people is not None:
        check_people_outputs(synth, spark, None, config.output, config.scope, config.write)
        people = synth.measure_people(config.input, config.run_id, config.input_format,
                                      parents=config.parents or None)
        _done("measure", config, people.rows, note=f"people measurements in {config.run_location}")
        return people.measurements
    model = _measure(spark, config, synth=synth)
    _done("measure", config, model, note=f"measurements in {config.run_location}")
    return model.measurements


def canonical(spark: SparkSession, config: RunConfig, codes: InputCodes | None = None) -> RunConfig:
    """``config`` with its partition values canonical for the input's column types (the input's schema
    only, from ``codes`` when the run holds them: :meth:`~privsyn_spark.runtime.input_scope.Scope.canonical`),
    so every step keys, binds and writes one partition whatever its spelling."""
    if not config.scope.partition:
        return config
    if codes is not None:
        return dataclasses.replace(config, scope=codes.scope)
    raw = read_table(spark, config.input, config.input_format, infer_types=False)
    return dataclasses.replace(config, scope=config.scope.canonical(raw))


def run_synthesize(spark: SparkSession, config: RunConfig) -> DataFrame:
    """CLI step `synthesize`: targets and synthesis from the run's persisted measurements (no raw data); a
    people schema's: the persons to ``--persons-output``, their rows to ``--output`` (returned as written)."""
    config = canonical(spark, config)
    synth = synthesizer(config)
    if synth.schema.people is not None:
        check_people_outputs(synth, spark, config.persons_output, config.output, config.scope,
                             config.write)
        people = measured_people(synth, config.run_id, config.source, spark)
        persons, rows = synthesize_people(spark, people, config.persons_output, config.output, config.people,
                                          config.seed, config.write.mode)
        _done_people("synthesize", config, people, persons, rows)
        return backend_of(spark).delta_frame(config.output)
    model = synth.measured(config.run_id, config.source, spark)
    output = output_for(spark, config)
    synth.check_output(config.output, output, spark)
    synthetic = _write(spark, config, _estimate(spark, model), output)
    _done("synthesize", config, model)
    return synthetic


def run_evaluate(spark: SparkSession, config: RunConfig) -> dict:
    """CLI step `evaluate`: metrics of the written synthetic table and the run report."""
    config = canonical(spark, config)
    synth = synthesizer(config)
    if synth.schema.people is not None:
        people = measured_people(synth, config.run_id, config.source, spark)
        report = people_report(spark, synth, people, config.input, config.input_format, config.output,
                               _run_doc(config), evaluate=True, parents=config.parents or None)
        _done("evaluate", config, people.rows, report=True)
        return report
    model = synth.measured(config.run_id, config.source, spark)
    with synth.open(config.input, config.input_format, config.run_id, spark, config.scope) as codes:
        report = _report(spark, config, model, codes)
    _done("evaluate", config, model, report=True)
    return report


def run(spark: SparkSession, config: RunConfig) -> dict:
    """CLI `run`: measure, estimate, synthesize, write, evaluate and report in one go (one read of the input);
    a people schema's run: :func:`run_people`."""
    synth = synthesizer(config)
    if synth.schema.people is not None:
        return run_people(spark, config, synth)
    if config.parents:
        raise UsageError("--parents needs a schema whose people section has form: parent_child")
    with synth.open(config.input, config.input_format, config.run_id, spark, config.scope) as codes:
        config = canonical(spark, config, codes)
        output = output_for(spark, config, codes)
        synth.check_output(config.output, output, spark)  # before any budget is spent
        model = _estimate(spark, _measure(spark, config, codes, synth))
        _write(spark, config, model, output)
        report = _report(spark, config, model, codes)
    _done("run", config, model, report=True)
    return report


def run_people(spark: SparkSession, config: RunConfig, synth: PrivSyn) -> dict:
    """CLI `run` of a people schema (docs/people.md): the steps measure, synthesize and evaluate in a row
    (:mod:`privsyn_spark.cli.people_steps`): the persons to ``--persons-output`` and their rows to ``--output``, two
    Delta tables of one commit each (both checked before any budget is spent), then the run report with the
    people metrics (unless ``--no-evaluate``)."""
    check_people_outputs(synth, spark, config.persons_output, config.output, config.scope, config.write)
    model = synth.measure_people(config.input, config.run_id, config.input_format, parents=config.parents or None)
    persons, rows = synthesize_people(spark, model, config.persons_output, config.output, config.people,
                                         config.seed, config.write.mode)
    report = people_report(spark, synth, model, config.input, config.input_format, config.output,
                           {**_run_doc(config), "persons_version": persons}, config.evaluate,
                           config.parents or None)
    _done_people("run", config, model, persons, rows, report=True)
    return report


def _done_people(step: str, config: RunConfig, model: PeopleModel, persons: int, rows: int,
                 report: bool = False) -> None:
    """A people step's closing line: both tables written (and the run report's location)."""
    folder = model.rows.run_folder
    where = folder.location(OPERATOR_DIR, REPORT_HTML) if report and folder is not None else None
    print(summary(step, ledger=model.record.dataset_ledger,
                  epsilon=None if config.synth.ledger else config.synth.epsilon, report=where,
                  note=f"wrote synthetic persons to {config.persons_output} (Delta version {persons}) and their "
                       f"rows to {config.output} (Delta version {rows})"), flush=True)


def _measure(spark: SparkSession, config: RunConfig, codes: InputCodes | None = None,
             synth: PrivSyn | None = None) -> SynthModel:
    synth = synth or synthesizer(config)
    if codes is not None:
        return synth.measure(codes, config.run_id)
    with synth.open(config.input, config.input_format, config.run_id, spark, config.scope) as source:
        return synth.measure(source, config.run_id)


def _estimate(spark: SparkSession, model: SynthModel) -> SynthModel:
    """The model's targets, with Spark warmed up for the synthesis and write meanwhile (runtime/warmup.py)."""
    folder = None if model.run_folder is None else model.run_folder.location("warm-up")
    with warm_up(spark, folder, (warm_write, warm_worker)):
        return model.estimate()


def _write(spark: SparkSession, config: RunConfig, model: SynthModel, output: OutputConfig) -> DataFrame:
    """Sample the run's table and write it to ``config.output`` (GUM's checkpoints live until it is written);
    the commit's provenance says ``privsyn.mode=fit`` (``privsyn-spark sample`` writes ``resample``)."""
    with model.checkpoints(spark, config.keep_scratch) as checkpoints:
        synthetic = model.sample(config.synth_rows, config.seed, spark, checkpoint_dir=checkpoints)
        with model.record.step("write"):
            model.record.output_version = write_delta(synthetic, config.output,
                                                      {**model.provenance(), "privsyn.mode": "fit"}, output)
    model.save_state()
    log.info("wrote %s synthetic rows to %s (Delta version %s)", f"{model.record.synthesis['rows']:,}",
             config.output, model.record.output_version)
    return synthetic


def _done(step: str, config: RunConfig, model: SynthModel, report: bool = False, note: str | None = None) -> None:
    """The step's one closing line on stdout (:func:`~privsyn_spark.progress.summary`), in every mode."""
    written = model.record.output_version is not None and step in ("run", "synthesize")
    where = model.run_folder.location(OPERATOR_DIR, REPORT_HTML) if report and model.run_folder else None
    print(summary(step, rows=model.record.synthesis["rows"] if written else None, table=config.output,
                  version=model.record.output_version, ledger=model.record.dataset_ledger,
                  epsilon=None if config.synth.ledger else config.synth.epsilon, report=where, note=note), flush=True)


def _report(spark: SparkSession, config: RunConfig, model: SynthModel, codes: InputCodes) -> dict:
    """Evaluate the written table against the run's input codes (optional, NOT private) and write
    operator/report.json / report.html into the run folder."""
    if config.evaluate:
        written = read_table(spark, config.output, "delta" if is_path(config.output) else "table")
        if config.scope.partition:  # this run's partition of the table, without the partition columns
            written = Scope(config.scope.partition).apply(written).drop(*config.scope.columns)
        with model.record.step("evaluate"):
            model.record.metrics = evaluate(codes, written, model.schema, label=config.label, seed=config.seed).metrics
    return model.write_report(_run_doc(config))


def _run_doc(config: RunConfig) -> dict[str, Any]:
    """What the run report says of the run (its ``run`` section)."""
    return {"run_id": config.run_id, "dataset": config.synth.dataset_id or config.input, "input": config.input,
            "output": config.output, "config": _config_dict(config)}


def _config_dict(config: RunConfig) -> dict[str, Any]:
    """The run configuration as a JSON-ready dict (for the report): its synthesizer's fields and the run's
    (``people``: the run's count of synthetic persons)."""
    doc = asdict(config)
    write = doc.pop("write")  # the report's names since before the write options were one object
    doc = {**doc.pop("synth"), **doc, "write_mode": write["mode"], "partition_by": write["partition_by"],
           "table_comment": write["comment"], "table_properties": write["properties"]}
    if isinstance(config.synth.schema, Schema):
        doc["schema"] = f"Schema {config.synth.schema.schema_hash()}"
    return doc
