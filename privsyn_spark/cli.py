"""The `privsyn-spark` command: the whole pipeline (`run`) or one step at a time.

    privsyn-spark run --input adult.csv.gz --schema adult.schema.yaml --output out/synthetic \\
        --epsilon 1 --run-id demo
    privsyn-spark infer-schema --input table --out draft.yaml --epsilon 0.1
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid

from privsyn_spark import __version__
from privsyn_spark.errors import PrivsynError
from privsyn_spark.pipeline import DEFAULT_DELTA, RunConfig

log = logging.getLogger("privsyn_spark")

STEPS = ("run", "measure", "synthesize", "evaluate")


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
    run = parser.add_argument_group("run")
    run.add_argument("--run-id", default=None,
                     help="run id; artifacts go to <runs-dir>/<run-id> and a re-run with the same id reuses "
                          "its measurements without spending budget (default: a new random id)")
    run.add_argument("--runs-dir", default="runs", help="folder of run artifacts (default: ./runs)")
    privacy = parser.add_argument_group("privacy")
    privacy.add_argument("--epsilon", type=float, default=1.0, help="privacy budget epsilon (default: 1)")
    privacy.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                         help=f"privacy budget delta (default: {DEFAULT_DELTA}; never derived from the data)")
    privacy.add_argument("--dataset-id", help="dataset key in the budget ledger (default: the input)")
    privacy.add_argument("--ledger", help="budget ledger Delta table (path or name); off when omitted")
    privacy.add_argument("--dataset-epsilon", type=float,
                         help="total epsilon the dataset may spend across runs (with --ledger; at --delta)")
    synth = parser.add_argument_group("synthesis")
    synth.add_argument("--rows", type=int, help="synthetic rows (default: the noisy row count)")
    synth.add_argument("--synthesizer", choices=["gum", "pgm"], default="gum",
                       help="gum: PrivSyn's GUM sharded over Spark (default); pgm: sample the graphical model")
    synth.add_argument("--seed", type=int, default=0, help="seed of synthesis (not of the privacy noise)")
    synth.add_argument("--shard-rows", type=int, default=1_000_000, help="records per GUM shard")
    synth.add_argument("--gum-rounds", type=int, default=8, help="GUM reconciliation rounds (cap)")
    synth.add_argument("--gum-sweeps", type=int, default=0,
                       help="GUM Gauss-Seidel sweeps after the rounds: each shard in turn fits the whole "
                            "deficit (P serial rounds per sweep; worth it for few, small shards)")
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--label", help="label column for the ML-efficacy metric")
    evaluation.add_argument("--no-evaluate", action="store_true", help="skip the (non-private) metrics")
    _spark_args(parser)


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
    infer.add_argument("--dataset-epsilon", type=float, help="total epsilon the dataset may spend (with --ledger)")
    infer.add_argument("--run-id", help="id of the draft in the ledger (default: a new random id)")
    _spark_args(infer)
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A RunConfig from parsed arguments (also used by jobs/)."""
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    return RunConfig(
        input=args.input, schema=args.schema, output=args.output or "", run_id=args.run_id or uuid.uuid4().hex[:12],
        runs_dir=args.runs_dir, epsilon=args.epsilon, delta=args.delta, input_format=args.input_format,
        synth_rows=args.rows, synthesizer=args.synthesizer, seed=args.seed, shard_rows=args.shard_rows,
        gum_rounds=args.gum_rounds, gum_sweeps=args.gum_sweeps, write_mode=args.write_mode,
        dataset_id=args.dataset_id, ledger=args.ledger,
        dataset_rho_budget=(rho_from_eps_delta(args.dataset_epsilon, args.delta)
                            if args.dataset_epsilon else None),
        label=args.label, evaluate=not args.no_evaluate)


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


def _draft_bounds(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Check infer-schema's options (before Spark starts) and parse its --bounds."""
    from privsyn_spark.errors import UsageError

    if args.non_private == (args.epsilon is not None):
        raise UsageError("infer-schema: give --epsilon E for a private draft, or --non-private (NOT private)")
    if args.ledger and not args.dataset_id:
        raise UsageError("infer-schema --ledger needs --dataset-id (the id later runs on this table use)")
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
    from privsyn_spark.runtime.tables import read_table
    from privsyn_spark.schema import infer

    if args.non_private:
        from privsyn_spark.schema.schema import save_schema

        draft = infer.infer_schema(read_table(spark, args.input, args.input_format), tuple(args.null_token),
                                   args.bins)
        save_schema(draft, args.out, header=infer.WARNING_HEADER)
        log.warning("wrote a DRAFT schema to %s: it is NOT private, review it before a private run", args.out)
        return
    bounds = _draft_bounds(args)
    if args.ledger:
        from privsyn_spark.privacy.accounting import rho_from_eps_delta

        infer.reserve_draft_budget(spark, args.ledger, args.dataset_id, args.run_id or uuid.uuid4().hex[:12],
                                   args.epsilon, args.delta,
                                   rho_from_eps_delta(args.dataset_epsilon, args.delta)
                                   if args.dataset_epsilon else None)
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

    if args.command == "infer-schema":
        _draft_bounds(args)  # usage errors before Spark starts

    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_spark_session(master=args.master, conf=conf)
    if args.command == "infer-schema":
        _infer_schema(spark, args)
        return 0
    config = config_from_args(args)
    log.info("run %s: %s (artifacts in %s)", config.run_id, args.command, config.run_dir)
    step = {"run": pipeline.run, "measure": pipeline.run_measure, "synthesize": pipeline.run_synthesize,
            "evaluate": pipeline.run_evaluate}[args.command]
    step(spark, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
