"""The `privsyn-spark` command: the whole pipeline (`run`) or one step at a time.

    privsyn-spark budget set --ledger runs/ledger --dataset-id adult --epsilon 3 --delta 1e-9
    privsyn-spark run --input adult.csv.gz --schema adult.schema.yaml --output out/synthetic \\
        --epsilon 1 --run-id demo --ledger runs/ledger --dataset-id adult
    privsyn-spark budget show --ledger runs/ledger          (a local ledger is read without Spark)
    privsyn-spark plan --schema adult.schema.yaml --epsilon 1 --no-ledger      (dry run: no data, no Spark)
    privsyn-spark infer-schema --input table --out draft.yaml --epsilon 0.1 --ledger runs/ledger --dataset-id adult
    privsyn-spark provenance out/synthetic
    privsyn-spark jars --fetch          (the Delta jars into the cache; prints the spark-submit line)
    privsyn-spark jars --class-archive  (the local driver's class-data archive into the cache)

Exit codes: 0 success, 2 usage (bad option, schema, run id), 3 budget refused, 4 bad input data,
1 anything else (retryable).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from privsyn_spark.api import SAMPLE_DATA, SAMPLE_SCHEMA, PrivSyn
from privsyn_spark.budget.dataset_budget import check_budget, check_epsilon_delta
from privsyn_spark.budget.ledger import all_datasets, check_run, dataset_state, local_states, require_ledger, set_budget
from privsyn_spark.budget.ledger_show import describe as describe_budget
from privsyn_spark.budget.ledger_state import DatasetState
from privsyn_spark.budget.ledger_store import check_exclusive
from privsyn_spark.cli import pipeline
from privsyn_spark.cli.options import (
    config_from_args,
    draft_bounds,
    draft_dtypes,
    privacy_ids,
    settings_from_args,
    validate_run_args,
)
from privsyn_spark.cli.parser import STEPS
from privsyn_spark.cli.parser import build_parser as _build_parser
from privsyn_spark.cli.pipeline import RunConfig
from privsyn_spark.cli.resample import SampleConfig, run_sample
from privsyn_spark.errors import EXIT_FAILURE, PrivsynError, UsageError, out_of_space
from privsyn_spark.measure.engine import check_first_pass
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.progress import summary
from privsyn_spark.release.draft_run import REVIEW_NOTE, draft_schema
from privsyn_spark.runtime.class_archive import build as build_class_archive
from privsyn_spark.runtime.delta_jars import describe as describe_jars
from privsyn_spark.runtime.delta_jars import fetch as fetch_jars
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.output_check import check_ledger_path, check_locations, check_output_path
from privsyn_spark.runtime.runs_location import DEFAULT_RUNS_DIR, check_default_runs_dir
from privsyn_spark.runtime.session import (
    JAVA_OPTIONS_KEY,
    LOCAL_DEFAULTS,
    build_spark_session,
    connect_url,
    jars_dir,
    local_driver_memory,
    small_job,
    stop_started_sessions,
)
from privsyn_spark.runtime.stale_scratch import StopSignal, install_stop_handlers, sweep_and_claim, terminated
from privsyn_spark.runtime.stale_scratch import release as release_claim
from privsyn_spark.schema.schema import load_schema
from privsyn_spark.select.selection_config import check_width
from privsyn_spark.write.delta_output import local_provenance, provenance

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("privsyn_spark")

__all__ = ["REVIEW_NOTE", "build_parser", "config_from_args", "main", "settings_from_args", "validate_run_args"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    return _build_parser(__doc__)


def _plan(args: argparse.Namespace) -> int:
    """`plan`: the API's dry run (:meth:`privsyn_spark.PrivSyn.plan`), before and without Spark."""
    synth = PrivSyn(args.schema, args.epsilon, args.delta, ledger=args.ledger, dataset_id=args.dataset_id,
                    no_ledger=args.no_ledger, max_cells=args.max_cells, settings=settings_from_args(args))
    print(synth.plan())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `privsyn-spark` command: exit codes as in :mod:`privsyn_spark.errors`."""
    args = build_parser().parse_args(argv)  # argparse exits 2 on a usage error itself
    install_stop_handlers()
    try:
        return _main(args)
    except (PrivsynError, StopSignal) as caught:  # a stop signal before the run claimed its folder: Terminated
        err = caught.error if isinstance(caught, StopSignal) else caught
        if args.debug:
            log.exception("%s", err)
        else:
            print(f"privsyn-spark: error: {err}", file=sys.stderr)
        return err.exit_code
    except Exception as err:
        message = out_of_space(err)  # a full disk: one line naming the location, not Spark's trace
        if message is None or args.debug:
            raise
        stop_started_sessions()  # the executors' last words before the error line, not after
        print(f"privsyn-spark: error: {message}", file=sys.stderr)
        return EXIT_FAILURE


def _check_before_spark(args: argparse.Namespace) -> RunConfig | None:
    """Everything checkable without Spark, before its session starts: options (the run's
    :class:`~privsyn_spark.PrivSyn`, :func:`validate_run_args`), input path, output."""
    bad_conf = [item for item in args.conf if "=" not in item]
    if bad_conf:
        raise UsageError(f"--conf expects KEY=VALUE, got {bad_conf[0]!r}")
    writes_ledger = args.command in ("run", "measure", "infer-schema") or getattr(args, "action", None) == "set"
    if writes_ledger and getattr(args, "ledger", None):
        check_ledger_path(args.ledger)  # a ledger that cannot be written: refused as the output is
    if args.command not in STEPS:
        return None
    config = validate_run_args(args)
    schema = config.synth.resolved
    if args.command in ("run", "measure"):  # the width and the first counting pass depend on the schema only
        check_width(len(schema.view.domain()), config.synth.settings.selection)
        check_first_pass(schema.domain(), config.synth.max_cells)
    unknown = [c for c in config.write.partition_by if c not in schema.names]
    if unknown and args.command in ("run", "synthesize"):
        raise UsageError(f"--output-partition-by {','.join(unknown)}: not a column the schema keeps "
                         f"(kept: {', '.join(schema.names)})")
    check_locations(args.input, config.output if args.command in ("run", "synthesize") else None, config.write.mode)
    return config


def _infer_schema(spark: SparkSession, args: argparse.Namespace) -> None:
    """The infer-schema sub-command: a private draft (--epsilon) or a labelled non-private one."""
    draft_schema(spark, args.input, args.out, input_format=args.input_format,
                 epsilon=None if args.non_private else args.epsilon, delta=args.delta, ledger=args.ledger,
                 dataset_id=args.dataset_id, no_ledger=args.no_ledger, run_id=args.run_id,
                 null_tokens=args.null_token, bins=args.bins, bounds=draft_bounds(args), spike_share=args.spike_share,
                 privacy_id=privacy_ids(args.privacy_id) or (), max_rows_per_id=args.max_rows_per_id,
                 dtypes=draft_dtypes(args))


def _main(args: argparse.Namespace) -> int:
    # the log: warnings by default (progress lines say what runs, unless --quiet), -v INFO, -vv debug
    logging.basicConfig(level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if args.command == "plan":
        return _plan(args)
    if args.command == "jars":  # no session: the cache, the spark-submit line, Spark's Ivy for --fetch
        if args.fetch:
            fetch_jars(args.repositories)
        if args.class_archive:
            _class_archive()
        print(describe_jars())
        return 0
    sample = _sample_config(args) if args.command == "sample" else None  # before Spark starts
    if args.command == "infer-schema":
        draft_bounds(args)  # usage errors before Spark starts
    elif args.command == "budget":
        _check_budget_args(args)
    config = _check_before_spark(args)  # before Spark starts
    if config is None:
        return _run_step(args, None, sample)

    if args.runs_dir is None:  # the default ./runs: refused on a cluster master (before Spark when it is given)
        check_default_runs_dir(None, args.master)
    claimed = sweep_and_claim(config.synth.runs_location, config.run_id)
    try:
        return _run_step(args, config, sample)
    except BaseException:
        stopped = terminated()
        if stopped is None:
            raise
        release_claim(claimed, terminated=True)
        claimed = None
        raise stopped from None
    finally:
        release_claim(claimed)


def _class_archive() -> None:
    """`jars --class-archive`: the local driver's class archive, from a run on the bundled sample."""
    sample = [sys.executable, "-m", "privsyn_spark.cli", "run", "--input", SAMPLE_DATA, "--schema", SAMPLE_SCHEMA,
              "--output", "{tmp}/out", "--runs-dir", "{tmp}/runs", "--epsilon", "1", "--no-ledger", "--no-evaluate",
              "-q", "--master", "local[2]"]
    build_class_archive(jars_dir(), LOCAL_DEFAULTS[JAVA_OPTIONS_KEY], local_driver_memory(), sample)


def _run_step(args: argparse.Namespace, config: RunConfig | None, sample: SampleConfig | None = None) -> int:
    connect_url(args.master, args.remote)  # both given: a usage error, before any reading
    read = _read_without_spark(args) if config is None and sample is None else None
    if read is not None:
        return read
    conf = dict(item.split("=", 1) for item in args.conf)
    small = small_job(getattr(args, "input", None), getattr(args, "rows", None))
    spark = build_spark_session(master=args.master, conf=conf, remote=args.remote, small=small)
    install_stop_handlers()  # again: a SparkContext that just started took SIGINT over
    if getattr(args, "runs_dir", "") is None and (config is not None or (sample is not None and sample.from_run)):
        check_default_runs_dir(spark)  # the default ./runs on a cluster master (spark-submit's --master)
    if args.command == "budget":
        return _budget(spark, args)
    if args.command == "infer-schema":
        _infer_schema(spark, args)
        kind = "a NOT private draft" if args.non_private else f"a private draft (epsilon {args.epsilon:g})"
        print(summary("infer-schema", note=f"wrote {kind} schema to {args.out}: review it, then set reviewed: true"),
              flush=True)
        return 0
    if args.command == "provenance":
        _print_provenance(provenance(spark, args.table), args.json)
        return 0
    if sample is not None:
        run_sample(spark, sample)
        return 0
    if config is None:
        raise UsageError(f"{args.command}: not a run step")
    if config.synth.ledger:  # at run start: a ledger store without mutual exclusion is refused before any work
        check_exclusive(spark, config.synth.ledger)
    log.info("run %s: %s (artifacts in %s)", config.run_id, args.command, config.run_location)
    step = {"run": pipeline.run, "measure": pipeline.run_measure, "synthesize": pipeline.run_synthesize,
            "evaluate": pipeline.run_evaluate}[args.command]
    step(spark, config)
    return 0


def _budget_unit(args: argparse.Namespace) -> str:
    """The privacy unit `budget set --privacy-id` names (``row`` without it)."""
    return PrivacyUnit.of(privacy_ids(args.privacy_id)).name


def _sample_config(args: argparse.Namespace) -> SampleConfig:
    """The `sample` command's :class:`~privsyn_spark.cli.resample.SampleConfig`, checked (no Spark)."""
    config = SampleConfig(output=args.output, from_run=args.from_run or None, model=args.model or None,
                          schema=args.schema or None, ledger=args.ledger or None,
                          runs_dir=DEFAULT_RUNS_DIR if args.runs_dir is None else args.runs_dir,
                          dataset_id=args.dataset_id or None, rows=args.rows, seed=args.seed,
                          synthesizer=args.synthesizer, scope=Scope.parse(args.partition),
                          settings=settings_from_args(args), mode=args.mode,
                          persons_output=args.persons_output or None, people=args.people)
    config.check()
    if config.schema:
        config.scope.check_schema(load_schema(config.schema).names)
    if config.model and "://" not in config.model and not (Path(config.model) / "model.json").is_file():
        raise UsageError(f"--model {config.model}: no saved model there (model.json is missing)")
    check_output_path(config.output, config.mode)
    return config


def _check_budget_args(args: argparse.Namespace) -> None:
    """`budget` options checked before Spark starts."""
    if args.action in ("set", "check") and not args.dataset_id:
        raise UsageError(f"budget {args.action} needs --dataset-id")
    if args.action == "set":
        if args.per_partition is not None and not args.per_partition.strip():
            raise UsageError("--per-partition needs a column name")
        check_budget(args.epsilon, args.delta, _budget_unit(args), args.per_partition,
                     args.partition_constant_per_person)
    elif args.epsilon is not None:
        check_epsilon_delta(args.epsilon, args.delta)
    if args.action == "check":
        if not args.ledger:
            raise UsageError("budget check needs --ledger and --dataset-id (empty values are not set)")
        Scope.parse(args.partition)


def _read_without_spark(args: argparse.Namespace) -> int | None:
    """`budget show`/`budget check` of a local path ledger and `provenance` of a local table: read with
    delta-rs, no Spark (None: not one of those, or Spark must read it)."""
    if args.command == "provenance":
        entries = local_provenance(args.table)
        if entries is None:
            return None
        _print_provenance(entries, args.json)
        return 0
    if args.command != "budget" or args.action == "set":
        return None
    states = local_states(args.ledger, args.dataset_id or None)
    return None if states is None else _print_budget(args, states)


def _budget(spark: SparkSession, args: argparse.Namespace) -> int:
    """`budget set` / `budget show` / `budget check`."""
    if args.action == "set":
        set_budget(spark, args.ledger, args.dataset_id, args.epsilon, args.delta, replace=args.replace,
                          privacy_unit=_budget_unit(args), per_partition=(args.per_partition or "").strip() or None,
                              partition_constant_per_person=args.partition_constant_per_person)
    elif args.action == "show":
        require_ledger(spark, args.ledger)
    states = ([dataset_state(spark, args.ledger, args.dataset_id)] if args.dataset_id
              else all_datasets(spark, args.ledger))
    return _print_budget(args, states)


def _print_budget(args: argparse.Namespace, states: list[DatasetState]) -> int:
    """What `budget set`/`show` print (each dataset's state) and `budget check` (its forecast)."""
    if args.action == "check":
        print(check_run(states[0], args.run_id or None, args.epsilon, args.delta, Scope.parse(args.partition).values()))
        return 0
    forecast = (args.epsilon, rho_from_eps_delta(args.epsilon, args.delta)) \
        if args.action != "set" and args.epsilon is not None else None
    if not states:
        print(f"ledger {args.ledger}: no datasets")
    for state in states:
        print("\n".join(describe_budget(state, forecast)))
    return 0


def _print_provenance(entries: list[dict], as_json: bool) -> None:
    """One line per version: version, time, operation, and the run's id, epsilon, delta, rho."""
    import json

    for entry in entries:
        run = entry["run"] or {}
        if as_json:
            print(json.dumps(entry, sort_keys=True, default=str))
            continue
        extra = "".join(f"  {key}={run[f'privsyn.{key}']}" for key in ("partition", "mode") if f"privsyn.{key}" in run)
        print(f"{entry['version']:>4}  {entry['timestamp']}  {entry['operation']:<34}  "
              f"run={run.get('privsyn.run_id', '-')}  epsilon={run.get('privsyn.epsilon', '-')}  "
              f"delta={run.get('privsyn.delta', '-')}  rho={run.get('privsyn.rho', '-')}{extra}")

