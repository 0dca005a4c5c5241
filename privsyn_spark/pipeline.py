"""The pipeline's steps glued together: measure, estimate, synthesize, write, evaluate, report.

Artifacts of a run live in ``<runs_dir>/<run_id>/`` (a local path or any Hadoop file system URI, see
:mod:`privsyn_spark.run_artifacts`): ``measurements/`` (the only thing read after measuring),
``targets/`` (consistent target marginals), ``report.json`` and ``report.html``.
Steps are idempotent: measuring a run id again reuses its measurements and spends nothing (with a
ledger, wherever the ledger says they are: :mod:`privsyn_spark.budget.release_guard`); synthesizing again
with the same seed rewrites the same table.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_spark.config import Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.evaluate.report import to_jsonable
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.runtime.storage import join
from privsyn_spark.version import __version__

log = logging.getLogger(__name__)

DEFAULT_DELTA = 1e-9
"""Documented default delta; never derived from the (private) row count."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs; the CLI and the Airflow DAG fill it from their arguments."""

    input: str                           # a table location, or a description of the API's DataFrame
    schema: Any                          # a schema file, or a Schema (the API)
    output: str
    run_id: str
    runs_dir: str = "runs"
    epsilon: float = 1.0
    delta: float = DEFAULT_DELTA
    input_format: str | None = None
    synth_rows: int | None = None        # default: the noisy total
    synthesizer: str = "gum"             # "gum" or "pgm" (sampling from the graphical model)
    seed: int = 0
    shard_rows: int = 1_000_000
    gum_rounds: int = 8
    gum_sweeps: int = 0                  # Gauss-Seidel sweeps after the rounds (ShardedGumConfig.sweeps)
    write_mode: str = "overwrite"
    partition_by: tuple[str, ...] = ()   # output partition columns (on create/overwrite)
    table_comment: str | None = None     # output table comment (on create/overwrite)
    table_properties: dict[str, str] = field(default_factory=dict)  # extra output table properties
    dataset_id: str | None = None        # budget ledger key (required with a ledger; its budget: `budget set`)
    ledger: str | None = None            # Delta path/table of the budget ledger (None: --no-ledger)
    recharge: bool = False               # a reserved run whose artifact is lost pays for fresh measurements
    log_exact_counts: bool = False       # operators only: exact tallies of the private table in the log
    label: str | None = None             # label column for the ML-efficacy metric
    evaluate: bool = True
    max_cells: int = DEFAULT_MAX_CELLS   # cap on the cells of one marginal-engine pass
    keep_scratch: bool = False           # keep the run's checkpoint files after it ends
    settings: Settings = field(default_factory=Settings)  # the rarely used knobs (--config file.yaml)

    @property
    def run_location(self) -> str:
        """``<runs_dir>/<run_id>`` as an absolute path or a URI."""
        return join(self.runs_dir, self.run_id)

    @property
    def run_dir(self) -> Path:
        """The run folder as a local path (a local ``runs_dir`` only; see :attr:`run_location`)."""
        return Path(self.runs_dir).expanduser() / self.run_id

    @property
    def measurements_dir(self) -> Path:
        return self.run_dir / "measurements"


@dataclass
class RunState:
    """What the steps produced, gathered for the report."""

    config: RunConfig
    timings: dict[str, float] = field(default_factory=dict)
    domain_handling: dict[str, Any] = field(default_factory=dict)
    estimation: dict[str, Any] = field(default_factory=dict)
    synthesis: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    output_version: int | None = None
    dataset_ledger: dict[str, Any] | None = None  # the dataset's ledger after this run's reservation
    model: Any = field(default=None, repr=False)
    """The graphical model the estimate step fitted (Private-PGM), as saved in ``<run>/targets/``; not in state.json."""


class _Timer:
    def __init__(self, state: RunState, step: str):
        self.state, self.step = state, step

    def __enter__(self):
        log.info("step %s: start", self.step)
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        seconds = time.perf_counter() - self.start
        self.state.timings[self.step] = self.state.timings.get(self.step, 0.0) + seconds
        log.info("step %s: done in %.1f s", self.step, seconds)


def _artifacts(config: RunConfig, spark=None) -> RunArtifacts:
    """The run folder's artifacts (a URI runs dir needs the active session's Hadoop file system)."""
    if spark is None and "://" in config.runs_dir:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    return RunArtifacts(config.runs_dir, config.run_id, spark)


def run_schema(config: RunConfig):
    """The run's Schema (``config.schema`` is a file or already a Schema)."""
    from privsyn_spark.schema.schema import Schema, load_schema

    return config.schema if isinstance(config.schema, Schema) else load_schema(config.schema)


def input_codes(spark, config: RunConfig, source=None):
    """The run's input (``source``: a DataFrame, default ``config.input``), read and encoded at most
    once (``InputCodes``); its scratch table under ``<run>/scratch`` is deleted when the returned
    context manager exits."""
    from privsyn_spark.measure.input_codes import InputCodes

    return InputCodes(spark, config.input if source is None else source, config.input_format, run_schema(config),
                      _artifacts(config, spark).location("scratch"))


def measure(spark, config: RunConfig, state: RunState | None = None, codes=None) -> Measurements:
    """Measure privately once per run id (two engine passes + the privacy core) or reuse the run's
    measurements; with a ledger, under its reservation (:func:`privsyn_spark.budget.release_guard.guarded_measure`:
    released again when the input is refused before any noise is drawn).

    ``codes``: the run's ``input_codes`` (kept for later steps); without it the step reads the input
    into its own scratch table and deletes it at the end.
    """
    from contextlib import nullcontext

    from privsyn_spark.budget.ledger_state import check_epsilon_delta
    from privsyn_spark.budget.release_guard import guarded_measure, run_fingerprint
    from privsyn_spark.measure.engine import check_domain_policies, count_marginals, one_and_two_way
    from privsyn_spark.measure.indif_scores import indif_scores
    from privsyn_spark.privacy.measure_privately import measure_privately
    from privsyn_spark.privacy.noise import SecureDiscreteGaussian

    check_epsilon_delta(config.epsilon, config.delta)  # before anything is read (the CLI checked already)
    if config.ledger and not config.dataset_id:
        raise UsageError("a ledger needs a dataset id (never derived from the input)")
    state = state or RunState(config)
    schema = run_schema(config)

    def draw(sampler, provenance: dict) -> Measurements:
        with _Timer(state, "measure"), (nullcontext(codes) if codes is not None
                                        else input_codes(spark, config)) as source:
            with _Timer(state, "read+encode"):
                packed = source.packed()  # the one scan of the input; both passes read these persisted codes
            with _Timer(state, "count 1+2-way"):
                first = count_marginals(packed, one_and_two_way(packed.domain), max_cells=config.max_cells)
            state.domain_handling = check_domain_policies(packed, first, log_exact_counts=config.log_exact_counts)
            one_way = {m: t for m, t in first.tables.items() if len(m) == 1}
            scores = indif_scores({m: t for m, t in first.tables.items() if len(m) == 2})
            del first  # exact counts stay inside this step

            counting = [0.0]  # seconds of the second engine pass, inside measure_privately

            def engine(marginals, recode):
                start = time.perf_counter()
                with _Timer(state, "count selected"):
                    tables = count_marginals(packed, marginals, recode, max_cells=config.max_cells).tables
                counting[0] += time.perf_counter() - start
                return tables

            start = time.perf_counter()
            measurements = measure_privately(one_way, scores, engine, packed.domain, run_id=config.run_id,
                                             schema_hash=schema.schema_hash(), epsilon=config.epsilon,
                                             delta=config.delta, sampler=sampler, split=config.settings.split,
                                             selection=config.settings.selection)
            state.timings["noise+select"] = time.perf_counter() - start - counting[0]
            return dataclasses.replace(measurements, provenance=provenance)

    measurements = guarded_measure(spark, config, run_fingerprint(config, schema.schema_hash()), draw,
                                   SecureDiscreteGaussian())
    if config.ledger:
        from privsyn_spark.budget.ledger import dataset_state

        held = dataset_state(spark, config.ledger, config.dataset_id)
        budget = held.budget.rho if held.budget is not None else None
        state.dataset_ledger = {"ledger": config.ledger, "dataset_id": config.dataset_id,
                                "spent_rho": held.spent_rho, "budget_rho": budget, "left_rho": held.left_rho}
    return measurements


def estimate(measurements: Measurements, config: RunConfig,
             state: RunState | None = None) -> dict[tuple[str, ...], np.ndarray]:
    """Consistent target marginals for GUM (Private-PGM, or PrivSyn's consistency fallback); cached."""
    from privsyn_spark.estimate.targets import consistent_targets, estimation_budget
    from privsyn_spark.estimate.zeroed_values import absent_values, drop_zeroed_values, unavailable_merged

    state = state or RunState(config)
    artifacts = _artifacts(config)
    cached = artifacts.load_targets(config.run_id)
    if cached is not None:
        tables, state.estimation = cached
        if state.estimation.get("method") == "pgm":
            state.model = artifacts.load_model(config.run_id, measurements.domain)
        return tables
    with _Timer(state, "estimate"):
        estimation = config.settings.estimation
        tables, method, info = consistent_targets(
            measurements.marginals, measurements.domain, measurements.noisy_total,
            estimation_budget(config.settings.selection.model_cells, estimation.estimator),
            estimator_choice=estimation.estimator, consistency_iters=estimation.consistency_iters)
        absent = absent_values(run_schema(config), measurements)
        tables = drop_zeroed_values(tables, measurements.marginals, measurements.domain,
                                    unavailable_merged(absent, measurements.value_maps, measurements.domain))
        model = info.pop("model", None)
        state.estimation = {"method": method, "info": to_jsonable(info)}
        if model is not None:  # synthesis uses the saved model, as a later step would: the same table
            artifacts.save_model(config.run_id, model)
            state.model = artifacts.load_model(config.run_id, measurements.domain)
        artifacts.save_targets(config.run_id, tables, state.estimation)
        log.info("targets from %s: %d tables", method, len(tables))
    return tables


def run_properties(config: RunConfig, measurements: Measurements) -> dict[str, str]:
    """Where a synthetic table came from: its Delta table properties and every commit's userMetadata."""
    return {"privsyn.run_id": config.run_id, "privsyn.epsilon": str(measurements.epsilon),
            "privsyn.delta": str(measurements.delta), "privsyn.rho": repr(measurements.rho),
            "privsyn.schema_hash": measurements.schema_hash, "privsyn.version": __version__,
            "privsyn.synthesizer": config.synthesizer, "privsyn.seed": str(config.seed)}


def config_dict(config: RunConfig) -> dict[str, Any]:
    """The run configuration as a JSON-ready dict (for the report)."""
    from privsyn_spark.schema.schema import Schema

    doc = asdict(config)
    if isinstance(config.schema, Schema):
        doc["schema"] = f"Schema {config.schema.schema_hash()}"
    return doc


def synthesize(spark, config: RunConfig, measurements: Measurements, targets: dict[tuple[str, ...], np.ndarray],
               state: RunState | None = None):
    """Synthesize merged codes (GUM sharded over Spark, or PGM sampling), decode, write the Delta table."""
    from privsyn_spark.estimate.zeroed_values import absent_values
    from privsyn_spark.privacy.table_size import default_rows
    from privsyn_spark.runtime.scratch import run_scratch
    from privsyn_spark.write.decode import decode_dataframe
    from privsyn_spark.write.delta_output import write_delta

    state = state or RunState(config)
    schema = run_schema(config)
    if schema.schema_hash() != measurements.schema_hash:
        raise UsageError(f"schema {config.schema} is not the one run {config.run_id} was measured with")
    rows = config.synth_rows if config.synth_rows is not None else default_rows(measurements)
    with run_scratch(spark, _artifacts(config, spark).checkpoints, config.keep_scratch) as checkpoints:
        with _Timer(state, "synthesize"):
            codes, info = _synthesize_codes(spark, config, measurements, targets, rows, checkpoints, state.model)
            state.synthesis = {"synthesizer": config.synthesizer, "rows": rows, **to_jsonable(info)}
            decoded = decode_dataframe(codes, schema, measurements.value_maps, measurements.one_way_original,
                                       config.seed, absent_values(schema, measurements))
        with _Timer(state, "write"):
            provenance = run_properties(config, measurements)
            state.output_version = write_delta(decoded, config.output, config.write_mode,
                                               properties={**config.table_properties, **provenance},
                                               user_metadata=provenance, partition_by=config.partition_by,
                                               comment=config.table_comment)
    log.info("wrote %s synthetic rows to %s (Delta version %s)", f"{rows:,}", config.output, state.output_version)
    return decoded


def _synthesize_codes(spark, config: RunConfig, measurements: Measurements,
                      targets: dict[tuple[str, ...], np.ndarray], rows: int, checkpoints: str, model=None):
    """A DataFrame of merged codes (one int column per attribute) and a dict describing the synthesis.

    ``model``: the estimate step's graphical model (None: consistency fallback, or targets cached by an
    earlier step): GUM starts from its samples, the ``pgm`` synthesizer samples it without fitting again.
    """
    if config.synthesizer == "gum":
        from privsyn_spark.synthesize.sharded.algorithm import ShardedGumConfig
        from privsyn_spark.synthesize.sharded.spark_driver import synthesize_sharded

        gum = ShardedGumConfig(gum=config.settings.gum, shard_size=config.shard_rows, max_rounds=config.gum_rounds,
                               sweeps=config.gum_sweeps)
        # reliable checkpoints (see runtime/scratch.py): a lost executor's shards are recomputed from them
        result = synthesize_sharded(spark, measurements.domain, targets, rows, seed=config.seed, config=gum,
                                    checkpoint_dir=checkpoints, model=model)
        rounds = [{"round": r, "l1_error": max(errors.values(), default=0.0) / max(result.n, 1),
                   "seconds": seconds}
                  for r, (errors, seconds) in enumerate(zip(result.history, result.round_seconds))]
        info = {"shards": len(result.context.sizes), "start": "1-way" if model is None else "model",
                "rounds": rounds,
                "final_l1_error": result.max_relative_error(),
                "final_errors": {",".join(k): v / max(result.n, 1) for k, v in result.final_errors.items()}}
        return result.records, info
    if config.synthesizer == "pgm":
        from privsyn_spark.estimate.targets import estimation_budget
        from privsyn_spark.synthesize.pgm_sampling import sample_model_sharded

        return sample_model_sharded(spark, measurements, rows, seed=config.seed, shard_rows=config.shard_rows,
                                    cell_budget=estimation_budget(config.settings.selection.model_cells),
                                    model=model)
    raise ValueError(f"unknown synthesizer {config.synthesizer!r} (use 'gum' or 'pgm')")


def _report(spark, config: RunConfig, measurements: Measurements, state: RunState, synthetic, codes) -> dict:
    """Evaluate (optional, not private) and write report.json / report.html into the run folder.

    The real side is read from ``codes`` (the run's ``input_codes``), not from the source again.
    """
    if config.evaluate and synthetic is not None:
        from privsyn_spark.evaluate.evaluation import evaluate as evaluate_tables
        from privsyn_spark.runtime.input_table import read_table

        # counts come from the run's persisted codes; only the value-level metrics of numeric columns
        # (KS distance, spike shares: not private, operators only) read the source's raw values again
        raw = (read_table(spark, config.input, config.input_format, infer_types=False)
               if isinstance(config.input, str) else config.input)
        with _Timer(state, "evaluate"):
            state.metrics = evaluate_tables(spark, codes.encoded(), synthetic, run_schema(config),
                                            label=config.label, seed=config.seed, real_values=raw)
    report = build_report(config, measurements, state)
    log.info("run report: %s", _artifacts(config, spark).write_report(report))
    return report


def build_report(config: RunConfig, measurements: Measurements, state: RunState) -> dict:
    """The run report dict (see privsyn_spark.evaluate.report for how it is rendered)."""
    from privsyn_spark.privacy.table_size import table_size_warnings, total_noise_sd

    domain = measurements.domain
    return to_jsonable({
        "run": {"run_id": config.run_id, "dataset": config.dataset_id or config.input, "input": config.input,
                "output": config.output, "output_version": state.output_version, "version": __version__,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "config": config_dict(config)},
        "budget": {"epsilon": measurements.epsilon, "delta": measurements.delta, "rho": measurements.rho,
                   "spent_rho": measurements.spent_rho, "ledger": measurements.ledger,
                   "dataset_ledger": state.dataset_ledger},
        "selection": {"selected_pairs": [list(p) for p in measurements.selected_pairs],
                      "marginals": [{"attrs": list(m.attrs), "rho": m.rho, "sigma": m.sigma,
                                     "cells": domain.cells(m.attrs)} for m in measurements.marginals],
                      "noisy_total": measurements.noisy_total, "noisy_total_sd": total_noise_sd(measurements),
                      "warnings": table_size_warnings(measurements)},
        "estimation": state.estimation,
        "synthesis": state.synthesis,
        "domain_handling": state.domain_handling,
        "timings": state.timings,
        "metrics": state.metrics,
    })


def run_measure(spark, config: RunConfig) -> Measurements:
    """CLI step `measure`: budget ledger reservation, then the private measurements (reused if present)."""
    state = _load_state(config)
    measurements = measure(spark, config, state)
    _save_state(config, state)
    return measurements


def run_synthesize(spark, config: RunConfig):
    """CLI step `synthesize`: targets and synthesis from the run's persisted measurements (no raw data)."""
    measurements = _load_measurements(spark, config)
    state = _load_state(config)  # what the measure step recorded (out-of-domain tallies, timings)
    check_output(spark, config)
    check_table_size(measurements)
    targets = estimate(measurements, config, state)
    synthetic = synthesize(spark, config, measurements, targets, state)
    _save_state(config, state)
    return synthetic


def run_evaluate(spark, config: RunConfig) -> dict:
    """CLI step `evaluate`: metrics of the written synthetic table and the run report."""
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.runtime.locations import is_path

    measurements = _load_measurements(spark, config)
    state = _load_state(config)
    synthetic = read_table(spark, config.output, "delta" if is_path(config.output) else "table")
    with input_codes(spark, config) as codes:
        return _report(spark, config, measurements, state, synthetic, codes)


def run(spark, config: RunConfig) -> dict:
    """CLI `run`: measure, estimate, synthesize, write, evaluate and report in one go (one read of the input)."""
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.runtime.locations import is_path

    state = RunState(config)
    check_output(spark, config)  # before any budget is spent
    with input_codes(spark, config) as codes:
        measurements = measure(spark, config, state, codes)
        _save_state(config, state)
        check_table_size(measurements)
        targets = estimate(measurements, config, state)
        synthesize(spark, config, measurements, targets, state)
        _save_state(config, state)
        written = read_table(spark, config.output, "delta" if is_path(config.output) else "table")
        return _report(spark, config, measurements, state, written, codes)


def check_output(spark, config: RunConfig) -> None:
    """Refuse an output location the write would fail on (file, non-Delta folder, other schema in append)."""
    from privsyn_spark.runtime.output_check import check_output_table
    from privsyn_spark.write.decode import output_ddl

    check_output_table(spark, config.output, config.write_mode, output_ddl(run_schema(config)))


def check_table_size(measurements: Measurements) -> None:
    """Stop (BadInputData) when the noisy total cannot be told from 0; log the report's size warnings."""
    from privsyn_spark.privacy.table_size import check_table_size as check
    from privsyn_spark.privacy.table_size import table_size_warnings

    check(measurements)
    for warning in table_size_warnings(measurements):
        log.warning("%s", warning)


def _load_measurements(spark, config: RunConfig) -> Measurements:
    """The run's measurements for the post-processing steps: with a ledger, the committed artifact
    (checked against its hash); without, the runs dir's. Refused if measured with other settings."""
    from privsyn_spark.budget.release_guard import (
        ArtifactLost,
        check_same_run,
        find_committed,
        local_artifact,
        run_fingerprint,
    )

    fingerprint = run_fingerprint(config, run_schema(config).schema_hash())
    if config.ledger:
        from privsyn_spark.budget.ledger import dataset_state

        held = dataset_state(spark, config.ledger, config.dataset_id).active(config.run_id)
        if held is None or held.artifact_sha256 is None:
            raise UsageError(f"run {config.run_id!r} has no committed measurements in ledger {config.ledger} "
                             f"(dataset {config.dataset_id!r}); run the `measure` step first")
        found = find_committed(spark, _artifacts(config, spark), held)
        if found is None:
            raise ArtifactLost(f"run {config.run_id!r}: its measurements ({held.artifact}) are missing or do not "
                               f"match the ledger's hash")
        measurements = found[0]
    else:
        measurements = local_artifact(config, spark)
        if measurements is None:
            raise UsageError(f"run {config.run_id!r} has no measurements in {config.run_location}; "
                             f"run the `measure` step first")
    check_same_run(measurements, fingerprint, config.run_id)
    return measurements


def _save_state(config: RunConfig, state: RunState) -> None:
    """Keep what the steps found (tallies, rounds, errors, timings) for the later steps' report."""
    doc = {"timings": state.timings, "domain_handling": state.domain_handling, "estimation": state.estimation,
           "synthesis": state.synthesis, "output_version": state.output_version,
           "dataset_ledger": state.dataset_ledger}
    _artifacts(config).write_json(to_jsonable(doc), "state.json")


def _load_state(config: RunConfig) -> RunState:
    state = RunState(config)
    doc = _artifacts(config).read_json("state.json")
    if doc is not None:
        state.timings, state.domain_handling = doc["timings"], doc["domain_handling"]
        state.estimation, state.synthesis = doc["estimation"], doc["synthesis"]
        state.output_version = doc["output_version"]
        state.dataset_ledger = doc.get("dataset_ledger")
    return state
