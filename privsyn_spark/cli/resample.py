"""`privsyn-spark sample`: a new synthetic table from a run's persisted measurements or a saved model,
reading no input at all and charging nothing (post-processing of a released artifact).

``--from-run RUN_ID`` takes the run's committed measurements (with a ledger: the artifact the ledger
recorded, checked against its hash; without: the runs dir's), and its estimated targets when the run
folder holds them; ``--from-run latest`` (with a ledger) the dataset's most recently committed run of
this schema. ``--model PATH`` loads a :meth:`~privsyn_spark.SynthModel.save`'d model. The output is
written like a run's (``--partition``: into that partition, replaceWhere) and its commit's
provenance says ``privsyn.mode=resample`` and which run's measurements it re-sampled. A people run's
(docs/people.md) writes new persons to ``--persons-output`` and their rows to ``--output``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from privsyn_spark.api import PrivSyn, write_delta
from privsyn_spark.budget.ledger import dataset_state
from privsyn_spark.config import OutputConfig, Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.people_model import PeopleModel, load_people, write_people
from privsyn_spark.progress import summary
from privsyn_spark.release.artifact import find_committed, local_artifact
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.output_check import check_run_id
from privsyn_spark.schema.schema import Schema
from privsyn_spark.synth_model import SynthModel

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from privsyn_spark.budget.ledger_state import DatasetState, RunReservation
    from privsyn_spark.synth_model import SynthModel

log = logging.getLogger(__name__)

LATEST = "latest"


@dataclass(frozen=True)
class SampleConfig:
    """What one `sample` asks for (the CLI and the DAG's resample mode fill it)."""

    output: str
    from_run: str | None = None          # a run id, or "latest" (with a ledger)
    model: str | None = None             # a saved model's folder
    schema: str | None = None            # the run's schema file (required with from_run)
    runs_dir: str = "runs"
    ledger: str | None = None
    dataset_id: str | None = None
    rows: int | None = None              # default: the run's noisy row count
    seed: int = 0
    synthesizer: str | None = None       # default: a saved model's own choice, else "gum"
    scope: Scope = field(default_factory=Scope)
    settings: Settings = field(default_factory=Settings)
    mode: str = "error"                  # "error" refuses an output (partition) holding rows; or "overwrite"
    persons_output: str | None = None    # a people run: the persons' table (their rows go to ``output``)
    people: int | None = None            # a people run: synthetic persons (default: the noisy person count)

    def check(self) -> None:
        """One-line :class:`UsageError` for every bad combination (no Spark needed)."""
        if (self.from_run is None) == (self.model is None):
            raise UsageError("sample: give --from-run RUN_ID (or latest) or --model PATH, exactly one")
        if self.from_run is not None and not self.schema:
            raise UsageError("sample --from-run needs --schema: the schema the run was measured with")
        if self.from_run == LATEST and not self.ledger:
            raise UsageError("sample --from-run latest needs --ledger and --dataset-id (the ledger knows the runs)")
        if self.ledger and not self.dataset_id:
            raise UsageError("--ledger needs --dataset-id")
        if self.model is not None and self.ledger:
            raise UsageError("sample --model reads a saved model; --ledger is for --from-run")
        if self.people is not None and self.people < 1:
            raise UsageError(f"--people must be >= 1, got {self.people}")
        if self.rows is not None and self.rows < 1:
            raise UsageError(f"--rows must be >= 1, got {self.rows}")
        if self.scope.where:
            raise UsageError("sample reads no input: --where has nothing to filter")
        if self.from_run not in (None, LATEST):
            check_run_id(self.from_run)


def latest_run(state: DatasetState, schema_hash: str) -> RunReservation:
    """The dataset's most recently committed run measured with the schema ``schema_hash``."""
    runs = [r for r in state.reservations if r.status == "committed"
            and r.fingerprint.get("schema_hash") == schema_hash]
    if not runs:
        raise UsageError(f"dataset {state.dataset_id!r} has no committed run of this schema to re-sample; "
                         f"fit one first")
    return max(runs, key=lambda r: r.seq)


def load_model(spark: SparkSession, config: SampleConfig) -> SynthModel | PeopleModel:
    """The fitted model to sample (module docstring); reads artifacts only, never the input."""
    if config.model is not None:
        people = load_people(config.model, spark)
        if people is not None:
            return people
        model = SynthModel.load(config.model, spark)
        saved = model.synthesizer
        if config.synthesizer is not None:  # given: it overrides the saved choice; not given: the saved one
            model.synthesizer = config.synthesizer
        log.info("sampling with %s (%s)", model.synthesizer, "the model's saved choice" if config.synthesizer is None
                 else f"--synthesizer given; the model was saved with {saved}")
        model.settings = replace(model.settings, progress=config.settings.progress)  # this call's --quiet
        return model
    assert config.from_run is not None and config.schema is not None
    schema = Schema.load(config.schema)
    run_id = config.from_run
    if config.ledger:
        assert config.dataset_id is not None
        state = dataset_state(spark, config.ledger, config.dataset_id)
        held = latest_run(state, schema.schema_hash()) if run_id == LATEST else state.active(run_id)
        if held is None or held.artifact_sha256 is None:
            raise UsageError(f"run {run_id!r} has no committed measurements in ledger {config.ledger} "
                             f"(dataset {config.dataset_id!r})")
        run_id = held.run_id
        found = find_committed(spark, RunArtifacts(config.runs_dir, run_id, spark), held)
        if found is None:
            raise UsageError(f"run {run_id!r}: its measurements ({held.artifact}) are missing or do not match "
                             f"the ledger's hash")
        measurements = found[0]
    else:
        local = local_artifact(config.runs_dir, run_id, spark)
        if local is None:
            raise UsageError(f"run {run_id!r} has no measurements under {config.runs_dir}")
        measurements = local
    measured = schema.people_tables()[1] if schema.people is not None else schema  # a people run's: its row table
    if measurements.schema_hash != measured.schema_hash():
        raise UsageError(f"--schema is not the schema run {run_id!r} was measured with")
    folder = RunArtifacts(config.runs_dir, run_id, spark)
    if schema.people is not None:
        return PeopleModel.of(measurements, schema, config.synthesizer or "gum", config.settings,
                              RunRecord.from_state(folder.read_state()), folder)
    return SynthModel(measurements, schema, synthesizer=config.synthesizer or "gum", settings=config.settings,
                      record=RunRecord.from_state(folder.read_state()), run_folder=folder)


def run_sample(spark: SparkSession, config: SampleConfig) -> int:
    """Sample ``config.rows`` records from the fitted model and write them; returns the Delta version.
    Nothing is read of the input and nothing is charged: the model is the released artifact."""
    config.check()
    model = load_model(spark, config)
    if isinstance(model, PeopleModel):
        return sample_people(spark, config, model)
    output = OutputConfig(config.mode, partition=config.scope.partition)
    PrivSyn(model.schema, no_ledger=True).check_output(config.output, output, spark)
    provenance = {"privsyn.mode": "resample", "privsyn.resampled_from": model.run_id}
    with model.checkpoints(spark) as checkpoints:
        synthetic = model.sample(config.rows, config.seed, spark, checkpoint_dir=checkpoints)
        version = write_delta(synthetic, config.output, {**model.provenance(config.seed), **provenance}, output)
    log.info("re-sampled run %s into %s (Delta version %d): no input read, nothing charged", model.run_id,
             config.output, version)
    print(summary("sample", rows=model.record.synthesis["rows"], table=config.output, version=version,
                  note=f"re-sampled run {model.run_id}: no input read, nothing charged"), flush=True)
    return version


def sample_people(spark: SparkSession, config: SampleConfig, model: PeopleModel) -> int:
    """`sample` of a people run: new persons to ``config.persons_output`` and their rows to ``config.output``
    (each checked before anything is sampled); returns the rows' Delta version."""
    if not config.persons_output:
        raise UsageError(f"run {model.run_id!r} is a people run: sample writes --persons-output (the persons) "
                         f"and --output (their rows)")
    if config.scope.partition:
        raise UsageError("a people run writes whole tables: --partition is refused")
    for target in (config.persons_output, config.output):
        PrivSyn(model.schema, no_ledger=True).check_output(target, OutputConfig(config.mode), spark)
    provenance = {**model.provenance(config.seed), "privsyn.mode": "resample", "privsyn.resampled_from": model.run_id}
    people = model.estimate().sample_people(config.people, config.seed, spark)
    persons, rows = write_people(people, config.persons_output, config.output, provenance, config.mode)
    print(summary("sample", note=f"re-sampled people run {model.run_id} into {config.persons_output} (Delta "
                                 f"version {persons}) and {config.output} (Delta version {rows}): no input read, "
                                 f"nothing charged"), flush=True)
    return rows
