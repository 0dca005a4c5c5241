"""The pipeline's steps glued together: measure, estimate, synthesize, write, evaluate, report.

Artifacts of a run live in ``<runs_dir>/<run_id>/``: ``measurements/`` (the only thing read after
measuring), ``targets/`` (consistent target marginals), ``report.json`` and ``report.html``.
Steps are idempotent: measuring a run id whose measurements exist reuses them and spends nothing;
synthesizing again with the same seed rewrites the same table.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_spark import __version__
from privsyn_spark.evaluate.report import to_jsonable
from privsyn_spark.privacy.measurements import Measurements

log = logging.getLogger(__name__)

DEFAULT_DELTA = 1e-9
"""Documented default delta; never derived from the (private) row count."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs; the CLI and the Airflow DAG fill it from their arguments."""

    input: str
    schema: str
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
    dataset_id: str | None = None        # budget ledger key (default: the input)
    ledger: str | None = None            # Delta path/table of the budget ledger (None: no ledger)
    dataset_rho_budget: float | None = None  # total rho the dataset may ever spend (with a ledger)
    label: str | None = None             # label column for the ML-efficacy metric
    evaluate: bool = True

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir).expanduser() / self.run_id

    @property
    def measurements_dir(self) -> Path:
        return self.run_dir / "measurements"

    @property
    def targets_dir(self) -> Path:
        return self.run_dir / "targets"


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


def measure(spark, config: RunConfig, state: RunState | None = None) -> Measurements:
    """Measure privately (or reuse this run's measurements): two engine passes + the privacy core."""
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.engine import check_domain_policies, count_marginals, one_and_two_way
    from privsyn_spark.measure.indif import indif_scores
    from privsyn_spark.privacy.noise import SecureDiscreteGaussian
    from privsyn_spark.privacy.release import measure_privately
    from privsyn_spark.runtime.tables import read_table
    from privsyn_spark.schema.schema import load_schema
    from privsyn_spark.write.ledger import reserve_for_run

    state = state or RunState(config)
    schema = load_schema(config.schema)
    existing = Measurements.load_for_run(config.measurements_dir, config.run_id, schema.schema_hash())
    if existing is not None:
        log.info("run %s: measurements exist in %s; reusing them, no privacy budget spent",
                 config.run_id, config.measurements_dir)
        return existing
    held = reserve_for_run(spark, config)  # refuses before any count when the dataset's budget would be exceeded
    if held is not None:
        spent = held.spent_before + held.rho
        budget = config.dataset_rho_budget
        state.dataset_ledger = {"ledger": config.ledger, "dataset_id": held.dataset_id, "spent_rho": spent,
                                "budget_rho": budget, "left_rho": None if budget is None else max(budget - spent, 0.0)}
    with _Timer(state, "measure"):
        encoded = encode(read_table(spark, config.input, config.input_format), schema)
        first = count_marginals(encoded, one_and_two_way(encoded.domain))
        state.domain_handling = check_domain_policies(encoded, first)
        one_way = {m: t for m, t in first.tables.items() if len(m) == 1}
        scores = indif_scores({m: t for m, t in first.tables.items() if len(m) == 2})
        del first  # exact counts stay inside this step

        def engine(marginals, recode):
            return count_marginals(encoded, marginals, recode).tables

        return measure_privately(one_way, scores, engine, encoded.domain, run_id=config.run_id,
                                 schema_hash=schema.schema_hash(), epsilon=config.epsilon,
                                 delta=config.delta, sampler=SecureDiscreteGaussian(),
                                 artifact_dir=config.measurements_dir)


def estimate(measurements: Measurements, config: RunConfig,
             state: RunState | None = None) -> dict[tuple[str, ...], np.ndarray]:
    """Consistent target marginals for GUM (Private-PGM, or PrivSyn's consistency fallback); cached."""
    from privsyn_spark.estimate.targets import consistent_targets
    from privsyn_spark.estimate.zeroed_values import absent_values, drop_zeroed_values, unavailable_merged
    from privsyn_spark.schema.schema import load_schema

    state = state or RunState(config)
    cached = load_targets(config.targets_dir, config.run_id)
    if cached is not None:
        tables, state.estimation = cached
        return tables
    with _Timer(state, "estimate"):
        tables, method, info = consistent_targets(measurements.marginals, measurements.domain,
                                                  measurements.noisy_total)
        absent = absent_values(load_schema(config.schema), measurements)
        tables = drop_zeroed_values(tables, measurements.marginals, measurements.domain,
                                    unavailable_merged(absent, measurements.value_maps, measurements.domain))
        state.estimation = {"method": method, "info": to_jsonable(info)}
        save_targets(config.targets_dir, config.run_id, tables, state.estimation)
        log.info("targets from %s: %d tables", method, len(tables))
    return tables


def save_targets(folder: Path, run_id: str, tables: dict[tuple[str, ...], np.ndarray], meta: dict) -> None:
    """Persist target tables (npz) and their description (json, written last: it marks completeness)."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(tables)
    np.savez_compressed(folder / "targets.npz", **{f"t{i}": tables[k] for i, k in enumerate(keys)})
    doc = {"run_id": run_id, "keys": [list(k) for k in keys], **meta}
    tmp = folder / "targets.json.tmp"
    tmp.write_text(json.dumps(doc, default=str))
    tmp.replace(folder / "targets.json")


def load_targets(folder: Path, run_id: str):
    """``(tables, meta)`` saved for ``run_id`` in ``folder``, or None."""
    if not (folder / "targets.json").exists():
        return None
    doc = json.loads((folder / "targets.json").read_text())
    if doc.get("run_id") != run_id:
        return None
    with np.load(folder / "targets.npz") as arrays:
        tables = {tuple(k): arrays[f"t{i}"] for i, k in enumerate(doc.pop("keys"))}
    doc.pop("run_id")
    return tables, doc


def run_properties(config: RunConfig, measurements: Measurements) -> dict[str, str]:
    """Delta table properties recording where a synthetic table came from."""
    return {"privsyn.run_id": config.run_id, "privsyn.epsilon": str(measurements.epsilon),
            "privsyn.delta": str(measurements.delta), "privsyn.rho": repr(measurements.rho),
            "privsyn.schema_hash": measurements.schema_hash, "privsyn.version": __version__,
            "privsyn.synthesizer": config.synthesizer, "privsyn.seed": str(config.seed)}


def config_dict(config: RunConfig) -> dict[str, Any]:
    """The run configuration as a JSON-ready dict (for the report)."""
    return asdict(config)


def synthesize(spark, config: RunConfig, measurements: Measurements, targets: dict[tuple[str, ...], np.ndarray],
               state: RunState | None = None):
    """Synthesize merged codes (GUM sharded over Spark, or PGM sampling), decode, write the Delta table."""
    from privsyn_spark.estimate.zeroed_values import absent_values
    from privsyn_spark.runtime.tables import write_delta
    from privsyn_spark.schema.schema import load_schema
    from privsyn_spark.synthesize.decode import decode_dataframe

    state = state or RunState(config)
    schema = load_schema(config.schema)
    if schema.schema_hash() != measurements.schema_hash:
        raise ValueError(f"schema {config.schema} is not the one run {config.run_id} was measured with")
    rows = config.synth_rows if config.synth_rows is not None else max(1, int(round(measurements.noisy_total)))
    with _Timer(state, "synthesize"):
        codes, info = _synthesize_codes(spark, config, measurements, targets, rows)
        state.synthesis = {"synthesizer": config.synthesizer, "rows": rows, **to_jsonable(info)}
        decoded = decode_dataframe(codes, schema, measurements.value_maps, measurements.one_way_original,
                                   config.seed, absent_values(schema, measurements))
    with _Timer(state, "write"):
        state.output_version = write_delta(decoded, config.output, config.write_mode,
                                           properties=run_properties(config, measurements),
                                           user_metadata={"privsyn.run_id": config.run_id})
    log.info("wrote %s synthetic rows to %s (Delta version %s)", f"{rows:,}", config.output, state.output_version)
    return decoded


def _synthesize_codes(spark, config: RunConfig, measurements: Measurements,
                      targets: dict[tuple[str, ...], np.ndarray], rows: int):
    """A DataFrame of merged codes (one int column per attribute) and a dict describing the synthesis."""
    if config.synthesizer == "gum":
        from privsyn_spark.synthesize.sharded import ShardedGumConfig, synthesize_sharded

        gum = ShardedGumConfig(shard_size=config.shard_rows, max_rounds=config.gum_rounds,
                               sweeps=config.gum_sweeps)
        # reliable checkpoints (spark.checkpoint.dir on a cluster, else under the run folder): a lost
        # executor's shards are recomputed from them, not lost
        checkpoints = (spark.sparkContext.getCheckpointDir()
                       or spark.conf.get("spark.checkpoint.dir", None)
                       or str((config.run_dir / "checkpoints").absolute()))
        result = synthesize_sharded(spark, measurements.domain, targets, rows, seed=config.seed, config=gum,
                                    checkpoint_dir=checkpoints)
        rounds = [{"round": r, "l1_error": max(errors.values(), default=0.0) / max(result.n, 1),
                   "seconds": seconds}
                  for r, (errors, seconds) in enumerate(zip(result.history, result.round_seconds))]
        info = {"shards": len(result.context.sizes), "rounds": rounds,
                "final_l1_error": result.max_relative_error(),
                "final_errors": {",".join(k): v / max(result.n, 1) for k, v in result.final_errors.items()}}
        return result.records, info
    if config.synthesizer == "pgm":
        from privsyn_spark.synthesize.pgm_sampling import sample_model_sharded

        return sample_model_sharded(spark, measurements, rows, seed=config.seed, shard_rows=config.shard_rows)
    raise ValueError(f"unknown synthesizer {config.synthesizer!r} (use 'gum' or 'pgm')")


def _report(spark, config: RunConfig, measurements: Measurements, state: RunState, synthetic) -> dict:
    """Evaluate (optional, not private) and write report.json / report.html into the run folder."""
    from privsyn_spark.evaluate.report import write_report

    if config.evaluate and synthetic is not None:
        from privsyn_spark.evaluate.evaluation import evaluate as evaluate_tables
        from privsyn_spark.runtime.tables import read_table
        from privsyn_spark.schema.schema import load_schema

        with _Timer(state, "evaluate"):
            state.metrics = evaluate_tables(spark, read_table(spark, config.input, config.input_format),
                                            synthetic, load_schema(config.schema), label=config.label,
                                            seed=config.seed)
    report = build_report(config, measurements, state)
    write_report(report, config.run_dir)
    log.info("run report: %s", config.run_dir / "report.html")
    return report


def build_report(config: RunConfig, measurements: Measurements, state: RunState) -> dict:
    """The run report dict (see privsyn_spark.evaluate.report for how it is rendered)."""
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
                      "noisy_total": measurements.noisy_total},
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
    measurements = _load_measurements(config)
    state = _load_state(config)  # what the measure step recorded (out-of-domain tallies, timings)
    targets = estimate(measurements, config, state)
    synthetic = synthesize(spark, config, measurements, targets, state)
    _save_state(config, state)
    return synthetic


def run_evaluate(spark, config: RunConfig) -> dict:
    """CLI step `evaluate`: metrics of the written synthetic table and the run report."""
    from privsyn_spark.runtime.tables import is_path, read_table

    measurements = _load_measurements(config)
    state = _load_state(config)
    synthetic = read_table(spark, config.output, "delta" if is_path(config.output) else "table")
    return _report(spark, config, measurements, state, synthetic)


def run(spark, config: RunConfig) -> dict:
    """CLI `run`: measure, estimate, synthesize, write, evaluate and report in one go."""
    state = RunState(config)
    measurements = measure(spark, config, state)
    targets = estimate(measurements, config, state)
    synthesize(spark, config, measurements, targets, state)
    _save_state(config, state)
    from privsyn_spark.runtime.tables import is_path, read_table

    written = read_table(spark, config.output, "delta" if is_path(config.output) else "table")
    return _report(spark, config, measurements, state, written)


def _load_measurements(config: RunConfig) -> Measurements:
    if not Measurements.exists(config.measurements_dir):
        raise FileNotFoundError(f"run {config.run_id} has no measurements in {config.measurements_dir}; "
                                f"run the `measure` step first")
    return Measurements.load(config.measurements_dir)


def _save_state(config: RunConfig, state: RunState) -> None:
    """Keep what the steps found (tallies, rounds, errors, timings) for the later steps' report."""
    doc = {"timings": state.timings, "domain_handling": state.domain_handling, "estimation": state.estimation,
           "synthesis": state.synthesis, "output_version": state.output_version,
           "dataset_ledger": state.dataset_ledger}
    (config.run_dir / "state.json").write_text(json.dumps(to_jsonable(doc), default=str))


def _load_state(config: RunConfig) -> RunState:
    state = RunState(config)
    path = config.run_dir / "state.json"
    if path.exists():
        doc = json.loads(path.read_text())
        state.timings, state.domain_handling = doc["timings"], doc["domain_handling"]
        state.estimation, state.synthesis = doc["estimation"], doc["synthesis"]
        state.output_version = doc["output_version"]
        state.dataset_ledger = doc.get("dataset_ledger")
    return state
