"""The `privsyn-spark` command: the whole pipeline (`run`) or one step at a time.

    privsyn-spark budget set --ledger ledger --dataset adult --epsilon 3 --delta 1e-9
    privsyn-spark run --input adult.csv.gz --schema adult.schema.yaml --output out/synthetic \\
        --epsilon 1 --run-id demo --ledger ledger --dataset-id adult
    privsyn-spark budget show --ledger ledger
    privsyn-spark plan --schema adult.schema.yaml --epsilon 1 --no-ledger      (dry run: no data, no Spark)
    privsyn-spark infer-schema --input table --out draft.yaml --epsilon 0.1 --ledger ledger --dataset-id adult
    privsyn-spark provenance out/synthetic

Exit codes: 0 success, 2 usage (bad option, schema, run id), 3 budget refused, 4 bad input data,
1 anything else (retryable).
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from privsyn_spark.cli_options import (
    config_from_args,
    draft_bounds,
    draft_dtypes,
    settings_from_args,
    validate_run_args,
)
from privsyn_spark.cli_parser import STEPS
from privsyn_spark.cli_parser import build_parser as _build_parser
from privsyn_spark.errors import PrivsynError, UsageError
from privsyn_spark.pipeline import RunConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("privsyn_spark")

REVIEW_NOTE = "# Once reviewed, set `reviewed: true` below: private runs refuse this file until then.\n"

__all__ = ["REVIEW_NOTE", "build_parser", "config_from_args", "main", "settings_from_args", "validate_run_args"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    return _build_parser(__doc__)


def _plan(args: argparse.Namespace) -> int:
    """`plan`: the API's dry run (:meth:`privsyn_spark.PrivSyn.plan`), before and without Spark."""
    from privsyn_spark.api import PrivSyn

    synth = PrivSyn(args.schema, args.epsilon, args.delta, ledger=args.ledger, dataset_id=args.dataset_id,
                    no_ledger=args.no_ledger, max_cells=args.max_cells, settings=settings_from_args(args))
    print(synth.plan())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `privsyn-spark` command: exit codes as in :mod:`privsyn_spark.errors`."""
    args = build_parser().parse_args(argv)  # argparse exits 2 on a usage error itself
    try:
        return _main(args)
    except PrivsynError as err:
        if args.debug:
            log.exception("%s", err)
        else:
            print(f"privsyn-spark: error: {err}", file=sys.stderr)
        return err.exit_code


def _check_before_spark(args: argparse.Namespace) -> RunConfig | None:
    """Everything checkable without Spark, before its session starts: options (the run's
    :class:`~privsyn_spark.PrivSyn`, :func:`validate_run_args`), input path, output."""
    from privsyn_spark.runtime.locations import is_path
    from privsyn_spark.runtime.output_check import check_output_path

    bad_conf = [item for item in args.conf if "=" not in item]
    if bad_conf:
        raise UsageError(f"--conf expects KEY=VALUE, got {bad_conf[0]!r}")
    if args.command not in STEPS:
        return None
    config = validate_run_args(args)
    local_input = is_path(args.input) and "://" not in args.input and not any(c in args.input for c in "*?[{")
    if local_input and not Path(args.input).expanduser().exists():
        raise UsageError(f"--input {args.input}: no such file or folder")
    if config.output and args.command in ("run", "synthesize"):
        check_output_path(config.output, config.write_mode)
    return config


def _infer_schema(spark: SparkSession, args: argparse.Namespace) -> None:
    """The infer-schema sub-command: a private draft (--epsilon) or a labelled non-private one."""
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.schema import infer

    draft_id = args.run_id or uuid.uuid4().hex[:12]
    if args.non_private:
        from privsyn_spark.schema.schema import save_schema

        if args.ledger:  # before the read: the dataset's guarantee is void from here on
            from privsyn_spark.budget.ledger import record_nonprivate

            record_nonprivate(spark, args.ledger, args.dataset_id, draft_id, "infer-schema --non-private")
        inferred = infer.infer_schema(read_table(spark, args.input, args.input_format), tuple(args.null_token),
                                      args.bins)
        save_schema(inferred, args.out, header=infer.WARNING_HEADER + REVIEW_NOTE, reviewed=False)
        log.warning("wrote a DRAFT schema to %s: it is NOT private, review it before a private run", args.out)
        return
    bounds = draft_bounds(args)
    if args.ledger:
        infer.reserve_draft_budget(spark, args.ledger, args.dataset_id, draft_id, args.epsilon, args.delta, args.out)
    # types from the operator or the table's declared types, never from the values (no CSV type inference)
    table = infer.with_declared_types(read_table(spark, args.input, args.input_format, infer_types=False),
                                      draft_dtypes(args))
    draft = infer.draft_schema_privately(table, args.epsilon, args.delta, null_tokens=tuple(args.null_token),
                                         bins=args.bins, bounds=bounds, spike_share=args.spike_share)
    draft.write(args.out)
    log.info("wrote a private DRAFT schema to %s (epsilon=%g, delta=%g); review it and set reviewed: true",
             args.out, args.epsilon, args.delta)


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from privsyn_spark import pipeline
    from privsyn_spark.runtime.session import build_spark_session

    if args.command == "plan":
        return _plan(args)
    if args.command == "infer-schema":
        draft_bounds(args)  # usage errors before Spark starts
    elif args.command == "budget" and args.action == "set":
        from privsyn_spark.budget.ledger_state import check_budget

        check_budget(args.epsilon, args.delta)
    config = _check_before_spark(args)  # before Spark starts
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_spark_session(master=args.master, conf=conf)
    if args.command == "budget":
        return _budget(spark, args)
    if args.command == "infer-schema":
        _infer_schema(spark, args)
        return 0
    if args.command == "provenance":
        _print_provenance(spark, args.table, args.json)
        return 0
    if config is None:
        raise UsageError(f"{args.command}: not a run step")
    if config.ledger:  # at run start: a ledger store without mutual exclusion is refused before any work
        from privsyn_spark.budget.ledger_table import check_exclusive

        check_exclusive(spark, config.ledger)
    log.info("run %s: %s (artifacts in %s)", config.run_id, args.command, config.run_location)
    step = {"run": pipeline.run, "measure": pipeline.run_measure, "synthesize": pipeline.run_synthesize,
            "evaluate": pipeline.run_evaluate}[args.command]
    step(spark, config)
    return 0


def _budget(spark: SparkSession, args: argparse.Namespace) -> int:
    """`budget set` / `budget show`."""
    from privsyn_spark.budget import ledger
    from privsyn_spark.budget.ledger_state import describe

    if args.action == "set":
        ledger.set_budget(spark, args.ledger, args.dataset, args.epsilon, args.delta, replace=args.replace)
        states = [ledger.dataset_state(spark, args.ledger, args.dataset)]
    else:
        ledger.require_ledger(spark, args.ledger)
        states = ([ledger.dataset_state(spark, args.ledger, args.dataset)] if args.dataset
                  else ledger.all_datasets(spark, args.ledger))
        if not states:
            print(f"ledger {args.ledger}: no datasets")
    for state in states:
        print("\n".join(describe(state)))
    return 0


def _print_provenance(spark: SparkSession, table: str, as_json: bool) -> None:
    """One line per version: version, time, operation, and the run's id, epsilon, delta, rho."""
    import json

    from privsyn_spark.write.delta_output import provenance

    for entry in provenance(spark, table):
        run = entry["run"] or {}
        if as_json:
            print(json.dumps(entry, sort_keys=True, default=str))
            continue
        print(f"{entry['version']:>4}  {entry['timestamp']}  {entry['operation']:<34}  "
              f"run={run.get('privsyn.run_id', '-')}  epsilon={run.get('privsyn.epsilon', '-')}  "
              f"delta={run.get('privsyn.delta', '-')}  rho={run.get('privsyn.rho', '-')}")


if __name__ == "__main__":
    sys.exit(main())
