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

from privsyn_spark.errors import PrivsynError, UsageError
from privsyn_spark.estimate.junction_tree import DEFAULT_CELL_BUDGET
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.pipeline import DEFAULT_DELTA, RunConfig
from privsyn_spark.version import __version__

log = logging.getLogger("privsyn_spark")

STEPS = ("run", "measure", "synthesize", "evaluate")
REVIEW_NOTE = "# Once reviewed, set `reviewed: true` below: private runs refuse this file until then.\n"


def _spark_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Spark")
    group.add_argument("--master", help="Spark master (default: $PRIVSYN_SPARK_MASTER, what spark-submit "
                                        "set, else local[*])")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark configuration, repeatable (e.g. spark.jars.packages=...)")


def _run_args(parser: argparse.ArgumentParser, step: str) -> None:
    io = parser.add_argument_group("tables")
    io.add_argument("--input", required=True, help="input table: Delta/Parquet/CSV path or catalog table name")
    io.add_argument("--input-format", choices=["delta", "parquet", "csv", "table"],
                    help="input format (default: detected from the path)")
    io.add_argument("--schema", required=True, help="schema file (YAML/JSON) declaring the public domain")
    io.add_argument("--output", required=step != "measure",
                    help="synthetic Delta table: a path or a catalog table name")
    io.add_argument("--write-mode", choices=["overwrite", "append"], default="overwrite",
                    help="Delta write mode for the synthetic table (default: overwrite)")
    io.add_argument("--partition-by", default="", metavar="COL[,COL...]",
                    help="partition columns of the synthetic table (on create/overwrite; an append keeps the "
                         "table's own and refuses different ones)")
    io.add_argument("--comment", help="table comment of the synthetic table (on create/overwrite)")
    io.add_argument("--table-property", action="append", default=[], metavar="KEY=VALUE",
                    help="extra table property of the synthetic table, repeatable (on create/overwrite; "
                         "privsyn.* keys are the run's provenance and cannot be set)")
    run = parser.add_argument_group("run")
    run.add_argument("--run-id", default=None,
                     help="run id; artifacts go to <runs-dir>/<run-id> and a re-run with the same id reuses "
                          "its measurements without spending budget (default: a new random id)")
    run.add_argument("--runs-dir", default="runs",
                     help="folder of run artifacts: a path or any Hadoop URI (file://, hdfs://, s3a://, abfss://); "
                          "shared storage on a cluster (default: ./runs)")
    privacy = parser.add_argument_group("privacy")
    privacy.add_argument("--epsilon", type=float, default=1.0, help="privacy budget epsilon (default: 1)")
    privacy.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                         help=f"privacy budget delta (default: {DEFAULT_DELTA}; never derived from the data)")
    privacy.add_argument("--model-cells", type=float, default=None,
                         help="selection keeps the junction tree of the measured marginals within this many "
                              f"cells in total, so Private-PGM can run (default {DEFAULT_CELL_BUDGET:.0e}; 0: "
                              "unbounded, PrivSyn's selection; overrides --config)")
    privacy.add_argument("--ledger", help="budget ledger Delta table (path or name) holding the dataset's budget "
                                          "(`privsyn-spark budget set`); required unless --no-ledger")
    privacy.add_argument("--dataset-id", help="dataset key in the ledger (required with --ledger)")
    privacy.add_argument("--no-ledger", action="store_true",
                         help="run without a budget ledger: nothing limits or records what this dataset spends")
    privacy.add_argument("--recharge", action="store_true",
                         help="a run id whose reserved measurements are lost pays for fresh ones (charged again)")
    privacy.add_argument("--log-exact-counts", action="store_true",
                         help="operators only: put exact tallies of the private table in the log and errors")
    privacy.add_argument("--dataset-epsilon", type=float, help=argparse.SUPPRESS)  # refused: see budget set
    synth = parser.add_argument_group("synthesis")
    synth.add_argument("--rows", type=int, help="synthetic rows (default: the noisy row count)")
    synth.add_argument("--synthesizer", choices=["gum", "pgm"], default="gum",
                       help="gum: PrivSyn's GUM sharded over Spark (default); pgm: sample the graphical model")
    synth.add_argument("--estimator", choices=["auto", "pgm", "consistency"], default=None,
                       help="target marginals from Private-PGM (pgm), PrivSyn's consistency, or auto: "
                            "Private-PGM when the model fits, else consistency (default; overrides --config)")
    synth.add_argument("--seed", type=int, default=0, help="seed of synthesis (not of the privacy noise)")
    synth.add_argument("--shard-rows", type=int, default=1_000_000, help="records per GUM shard")
    synth.add_argument("--gum-rounds", type=int, default=8, help="GUM reconciliation rounds (cap)")
    synth.add_argument("--gum-sweeps", type=int, default=0,
                       help="GUM Gauss-Seidel sweeps after the rounds: each shard in turn fits the whole "
                            "deficit (P serial rounds per sweep; worth it for few, small shards)")
    run.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS,
                     help=f"cap on the cells of one marginal-engine pass (8 bytes each per Spark task; "
                          f"default {DEFAULT_MAX_CELLS:,}); a larger request stops before any noise is drawn")
    run.add_argument("--keep-scratch", action="store_true",
                     help="keep the run's checkpoint files (removed when the run ends by default)")
    _config_arg(run)
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--label", help="label column for the ML-efficacy metric")
    evaluation.add_argument("--no-evaluate", action="store_true", help="skip the (non-private) metrics")
    _spark_args(parser)


def _config_arg(group) -> None:
    group.add_argument("--config", metavar="FILE.yaml",
                       help="rarely used settings (privsyn_spark.config.Settings): sections budget_split, selection, "
                            "estimation, gum")


def _plan_parser(sub) -> None:
    plan = sub.add_parser("plan", help="dry run: the rho split, sigma per release, cells (reads no data, no Spark)",
                          description="Print what a run would release from the schema and the budget alone.")
    plan.add_argument("--schema", required=True, help="schema file (YAML/JSON)")
    plan.add_argument("--epsilon", type=float, default=1.0, help="privacy budget epsilon (default: 1)")
    plan.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                      help=f"privacy budget delta (default: {DEFAULT_DELTA})")
    plan.add_argument("--ledger", help="budget ledger the run would charge (not read by the dry run)")
    plan.add_argument("--dataset-id", help="dataset key in the ledger")
    plan.add_argument("--no-ledger", action="store_true", help="the run would have no budget ledger")
    plan.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS, help="cap on one engine pass's cells")
    _config_arg(plan)


def _plan(args: argparse.Namespace) -> int:
    """`plan`: the API's dry run (:meth:`privsyn_spark.PrivSyn.plan`), before and without Spark."""
    from privsyn_spark.api import PrivSyn
    from privsyn_spark.config import Settings

    settings = Settings.load(args.config) if args.config else Settings()
    synth = PrivSyn(args.schema, args.epsilon, args.delta, ledger=args.ledger, dataset_id=args.dataset_id,
                    no_ledger=args.no_ledger, max_cells=args.max_cells, settings=settings)
    print(synth.plan())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(prog="privsyn-spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"privsyn-spark {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--debug", action="store_true", help="print the full trace of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {
        "run": "the whole pipeline: measure, select, estimate, synthesize, write, evaluate, report",
        "measure": "the private part only: marginals, noise, selection -> <run>/measurements",
        "synthesize": "estimate targets and synthesize from a run's measurements, write the Delta table",
        "evaluate": "compare the input and the synthetic table, write the run report",
    }
    for step in STEPS:
        _run_args(sub.add_parser(step, help=helps[step], description=helps[step]), step)
    _plan_parser(sub)
    infer = sub.add_parser("infer-schema", help="draft a schema from a table, privately (--epsilon) or not",
                           description="Draft a schema file from a table for a person to review. With --epsilon "
                                       "the draft is differentially private (its cost is charged and written in "
                                       "its header); --non-private reads category lists and bounds directly "
                                       "(NOT private).")
    infer.add_argument("--input", required=True, help="table to read")
    infer.add_argument("--input-format", choices=["delta", "parquet", "csv", "table"])
    infer.add_argument("--out", required=True, help="schema file to write (.yaml or .json)")
    infer.add_argument("--null-token", action="append", default=[], help="string read as null (repeatable)")
    infer.add_argument("--bins", type=int, default=16, help="bins per numerical column (default 16)")
    infer.add_argument("--epsilon", type=float, help="privacy budget of the draft (a private draft)")
    infer.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"its delta (default {DEFAULT_DELTA})")
    infer.add_argument("--bounds", action="append", default=[], metavar="COLUMN=LO:HI",
                       help="declared public bounds of a numeric column (repeatable); else the dtype's range "
                            "is assumed and the header says so")
    infer.add_argument("--spike-share", type=float, help="share above which one value gets its own bin "
                                                        "(default 0.05)")
    infer.add_argument("--non-private", action="store_true",
                       help="read the values and bounds from the data: NOT private")
    infer.add_argument("--ledger", help="budget ledger Delta table: the draft's rho is reserved there")
    infer.add_argument("--dataset-id", help="dataset key in the ledger (required with --ledger; use the same "
                                            "id as the runs on this table)")
    infer.add_argument("--run-id", help="id of the draft in the ledger (default: a new random id)")
    infer.add_argument("--no-ledger", action="store_true",
                       help="draft privately without a budget ledger: nothing limits or records what it spends")
    _spark_args(infer)
    budget = sub.add_parser("budget", help="a dataset's total privacy budget in the ledger: set it, show it",
                            description="The ledger holds each dataset's total budget; runs read it.")
    actions = budget.add_subparsers(dest="action", required=True)
    setter = actions.add_parser("set", help="store a dataset's total budget (once; --replace to change it)")
    setter.add_argument("--ledger", required=True, help="budget ledger Delta table (path or name)")
    setter.add_argument("--dataset", required=True, help="dataset id (what runs pass as --dataset-id)")
    setter.add_argument("--epsilon", type=float, required=True, help="total epsilon of the dataset, all runs")
    setter.add_argument("--delta", type=float, required=True, help="the delta that epsilon is stated at")
    setter.add_argument("--replace", action="store_true",
                        help="change an existing budget (recorded in the ledger; spent stays spent)")
    _spark_args(setter)
    show = actions.add_parser("show", help="spent and left per dataset (epsilon at its delta) and each release")
    show.add_argument("--ledger", required=True, help="budget ledger Delta table (path or name)")
    show.add_argument("--dataset", help="one dataset only")
    _spark_args(show)
    prov = sub.add_parser("provenance", help="list the runs that wrote each version of a synthetic Delta table",
                          description="List every version of a Delta table with the privsyn-spark run that wrote "
                                      "it (run id, epsilon, delta, rho from the commit's userMetadata).")
    prov.add_argument("table", help="Delta table: a path/URI or a catalog table name")
    prov.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    _spark_args(prov)
    return parser


def _table_properties(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict; privsyn.* keys are reserved for the run's provenance."""
    from privsyn_spark.errors import UsageError

    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--table-property {item!r}: expected KEY=VALUE")
        if key.strip().startswith("privsyn."):
            raise UsageError(f"--table-property {key.strip()!r}: privsyn.* properties record the run and are set "
                             f"by privsyn-spark itself")
        props[key.strip()] = value
    return props


def validate_run_args(args: argparse.Namespace) -> None:
    """Everything a run can be refused for without Spark: epsilon, delta, ledger or --no-ledger,
    dataset id, runs dir, schema (an unreviewed draft is refused), a local run id reused with other
    settings. Raises a one-line :class:`UsageError`."""
    from privsyn_spark.budget.ledger_state import check_epsilon_delta
    from privsyn_spark.budget.release_guard import check_same_run, local_artifact, run_fingerprint
    from privsyn_spark.schema.schema import load_schema

    if args.dataset_epsilon is not None:
        raise UsageError("--dataset-epsilon is gone: store the dataset's total once with `privsyn-spark budget "
                         "set --ledger L --dataset ID --epsilon E --delta D`; runs read it from the ledger")
    check_epsilon_delta(args.epsilon, args.delta)
    args.ledger, args.dataset_id = args.ledger or None, args.dataset_id or None  # empty (a DAG param): unset
    if args.ledger and args.no_ledger:
        raise UsageError("give --ledger or --no-ledger, not both")
    if not args.ledger and not args.no_ledger:
        raise UsageError("a run needs a budget ledger: pass --ledger L --dataset-id ID (after `privsyn-spark "
                         "budget set`), or --no-ledger to run without any limit or record")
    if args.ledger and not args.dataset_id:
        raise UsageError("--ledger needs --dataset-id: the dataset's key in the ledger (never derived from the input)")
    if args.recharge and not args.ledger:
        raise UsageError("--recharge needs --ledger")
    if not (args.runs_dir or "").strip():
        raise UsageError("--runs-dir must name a folder or a URI (shared storage on a cluster)")
    schema = load_schema(args.schema)
    if args.run_id and "://" not in args.runs_dir:
        config = config_from_args(args)
        found = local_artifact(config)
        if found is not None:
            check_same_run(found, run_fingerprint(config, schema.schema_hash()), config.run_id)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse option values no run can use (before Spark starts and before any budget is spent)."""
    from privsyn_spark.runtime.output_check import check_run_id

    for option, minimum in (("rows", 1), ("shard_rows", 1), ("gum_rounds", 0), ("gum_sweeps", 0),
                            ("max_cells", 1)):
        value = getattr(args, option, None)
        if value is not None and value < minimum:
            raise UsageError(f"--{option.replace('_', '-')} must be >= {minimum}, got {value}")
    if args.run_id is not None:
        check_run_id(args.run_id)
    if (getattr(args, "model_cells", None) or 0) < 0:
        raise UsageError(f"--model-cells must be >= 0 (0: unbounded), got {args.model_cells:g}")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A RunConfig from parsed arguments (also used by jobs/); raises UsageError for unusable values."""
    _check_options(args)
    return RunConfig(settings=settings_from_args(args),
        input=args.input, schema=args.schema, output=args.output or "", run_id=args.run_id or uuid.uuid4().hex[:12],
        runs_dir=args.runs_dir, epsilon=args.epsilon, delta=args.delta, input_format=args.input_format,
        synth_rows=args.rows, synthesizer=args.synthesizer, seed=args.seed, shard_rows=args.shard_rows,
        gum_rounds=args.gum_rounds, gum_sweeps=args.gum_sweeps, write_mode=args.write_mode,
        partition_by=tuple(c.strip() for c in args.partition_by.split(",") if c.strip()),
        table_comment=args.comment, table_properties=_table_properties(args.table_property),
        dataset_id=args.dataset_id or None, ledger=args.ledger or None, recharge=args.recharge,
        log_exact_counts=args.log_exact_counts, label=args.label, evaluate=not args.no_evaluate,
        max_cells=args.max_cells, keep_scratch=args.keep_scratch)


def settings_from_args(args: argparse.Namespace):
    """The run's :class:`~privsyn_spark.config.Settings`: ``--config``, then the flags that override it."""
    import dataclasses

    from privsyn_spark.config import Settings

    settings = Settings.load(args.config) if getattr(args, "config", None) else Settings()
    if getattr(args, "model_cells", None) is not None:
        settings = dataclasses.replace(settings, selection=dataclasses.replace(
            settings.selection, model_cells=args.model_cells or None))
    if getattr(args, "estimator", None):
        settings = dataclasses.replace(settings, estimation=dataclasses.replace(
            settings.estimation, estimator=args.estimator))
    return settings


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
    """Everything checkable without Spark, before its session starts: options, input path, schema, output."""
    from privsyn_spark.runtime.locations import is_path
    from privsyn_spark.runtime.output_check import check_output_path
    from privsyn_spark.schema.schema import load_schema

    bad_conf = [item for item in args.conf if "=" not in item]
    if bad_conf:
        raise UsageError(f"--conf expects KEY=VALUE, got {bad_conf[0]!r}")
    if args.command not in STEPS:
        return None
    config = config_from_args(args)
    local_input = is_path(args.input) and "://" not in args.input and not any(c in args.input for c in "*?[{")
    if local_input and not Path(args.input).expanduser().exists():
        raise UsageError(f"--input {args.input}: no such file or folder")
    load_schema(config.schema)
    if config.output and args.command in ("run", "synthesize"):
        check_output_path(config.output, config.write_mode)
    return config


def _draft_bounds(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Check infer-schema's options (before Spark starts) and parse its --bounds."""
    from privsyn_spark.errors import UsageError

    if args.non_private == (args.epsilon is not None):
        raise UsageError("infer-schema: give --epsilon E for a private draft, or --non-private (NOT private)")
    from privsyn_spark.budget.ledger_state import check_epsilon_delta

    if args.epsilon is not None:
        check_epsilon_delta(args.epsilon, args.delta)
    if args.ledger and not args.dataset_id:
        raise UsageError("infer-schema --ledger needs --dataset-id (the id later runs on this table use)")
    if args.epsilon is not None and not args.ledger and not args.no_ledger:
        raise UsageError("a private draft spends budget: pass --ledger L --dataset-id ID (the dataset's budget "
                         "from `privsyn-spark budget set`), or --no-ledger to draft without any record")
    if args.ledger and args.no_ledger:
        raise UsageError("give --ledger or --no-ledger, not both")
    bounds = {}
    for item in args.bounds:
        try:
            column, span = item.rsplit("=", 1)
            lo, hi = (float(v) for v in span.split(":"))
        except ValueError:
            raise UsageError(f"--bounds {item!r}: expected COLUMN=LO:HI") from None
        if not lo < hi:
            raise UsageError(f"--bounds {item!r}: LO must be below HI")
        bounds[column] = (lo, hi)
    return bounds


def _infer_schema(spark, args: argparse.Namespace) -> None:
    """The infer-schema sub-command: a private draft (--epsilon) or a labelled non-private one."""
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.schema import infer

    if args.non_private:
        from privsyn_spark.schema.schema import save_schema

        draft = infer.infer_schema(read_table(spark, args.input, args.input_format), tuple(args.null_token),
                                   args.bins)
        save_schema(draft, args.out, header=infer.WARNING_HEADER + REVIEW_NOTE, reviewed=False)
        log.warning("wrote a DRAFT schema to %s: it is NOT private, review it before a private run", args.out)
        return
    bounds = _draft_bounds(args)
    if args.ledger:
        infer.reserve_draft_budget(spark, args.ledger, args.dataset_id, args.run_id or uuid.uuid4().hex[:12],
                                   args.epsilon, args.delta, args.out)
    draft = infer.draft_schema_privately(read_table(spark, args.input, args.input_format), args.epsilon, args.delta,
                                         null_tokens=tuple(args.null_token), bins=args.bins, bounds=bounds,
                                         spike_share=args.spike_share)
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
    if args.command in STEPS:
        validate_run_args(args)  # before Spark starts
    elif args.command == "infer-schema":
        _draft_bounds(args)  # usage errors before Spark starts
    elif args.command == "budget" and args.action == "set":
        from privsyn_spark.budget.ledger_state import check_budget

        check_budget(args.epsilon, args.delta)
    config = _check_before_spark(args)
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
    log.info("run %s: %s (artifacts in %s)", config.run_id, args.command, config.run_location)
    step = {"run": pipeline.run, "measure": pipeline.run_measure, "synthesize": pipeline.run_synthesize,
            "evaluate": pipeline.run_evaluate}[args.command]
    step(spark, config)
    return 0


def _budget(spark, args: argparse.Namespace) -> int:
    """`budget set` / `budget show`."""
    from privsyn_spark.budget import ledger
    from privsyn_spark.budget.ledger_state import describe

    if args.action == "set":
        ledger.set_budget(spark, args.ledger, args.dataset, args.epsilon, args.delta, replace=args.replace)
        states = [ledger.dataset_state(spark, args.ledger, args.dataset)]
    else:
        states = ([ledger.dataset_state(spark, args.ledger, args.dataset)] if args.dataset
                  else ledger.all_datasets(spark, args.ledger))
        if not states:
            print(f"ledger {args.ledger}: no datasets")
    for state in states:
        print("\n".join(describe(state)))
    return 0


def _print_provenance(spark, table: str, as_json: bool) -> None:
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
