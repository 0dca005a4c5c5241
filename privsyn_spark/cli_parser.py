"""The `privsyn-spark` command's argument parser (every sub-command and flag; see :mod:`privsyn_spark.cli`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from privsyn_spark.config import DEFAULT_DELTA, DEFAULT_EPSILON
from privsyn_spark.estimate.junction_tree import DEFAULT_CELL_BUDGET
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.version import __version__
from privsyn_spark.write.delta_output import WRITE_MODES

STEPS = ("run", "measure", "synthesize", "evaluate")
READ_BY = {
    "output": ("synthesize", "evaluate"), "write_mode": ("synthesize",), "partition_by": ("synthesize",),
    "comment": ("synthesize",), "table_property": ("synthesize",), "model_cells": ("measure", "synthesize"),
    "recharge": ("measure",), "log_exact_counts": ("measure",), "max_cells": ("measure",), "rows": ("synthesize",),
    "synthesizer": ("synthesize",), "estimator": ("synthesize",), "seed": ("synthesize", "evaluate"),
    "shard_rows": ("synthesize",), "gum_rounds": ("synthesize",), "gum_sweeps": ("synthesize",),
    "keep_scratch": ("synthesize",), "label": ("evaluate",), "no_evaluate": (), "persons_output": ("synthesize",),
    "people": ("synthesize",), "people_split": ("measure",), "parents": ("measure", "evaluate"),
}
"""The run options only some steps read (argparse destination -> those steps; `run` reads them all, every
other option is read by every step). A step's ``--help`` lists only its own; it accepts the others and
ignores them, so that one argument list serves every step (as the Airflow DAG passes it)."""
OTHER_STEPS_NOTE = ("The other steps' options are accepted too and ignored, so that one argument list serves "
                    "every step (the Airflow DAG passes one).")


LEDGER_HELP = "budget ledger Delta table (a path, e.g. runs/ledger, or a persistent catalog's table)"


class _Deprecated(argparse.Action):
    """An old spelling of an option: stores into the new one's destination and says to use the new name."""

    def __init__(self, *args: Any, new: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"privsyn-spark: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _dataset_arg(group: Any, help: str) -> None:
    """``--dataset-id`` (the dataset's key in the ledger) and its deprecated spelling ``--dataset``."""
    group.add_argument("--dataset-id", help=help)
    group.add_argument("--dataset", dest="dataset_id", action=_Deprecated, new="--dataset-id", help=argparse.SUPPRESS)


def _optional_int(text: str) -> int | None:
    """An int option where an empty value (a DAG param left empty) means "not given"."""
    return int(text) if text.strip() else None


def _spark_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Spark")
    group.add_argument("--master", help="Spark master (default: $PRIVSYN_SPARK_MASTER, what spark-submit "
                                        "set, else local[*])")
    group.add_argument("--remote", metavar="sc://HOST:PORT",
                       help="a Spark Connect server to run on instead of a master (default: $SPARK_REMOTE); it "
                            "needs Delta Lake (docs/operations.md#spark-connect)")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark configuration, repeatable (e.g. spark.jars.packages=...)")
    group.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="as before the command: the log's INFO lines on stderr (-vv: debug)")


def _run_args(parser: argparse.ArgumentParser, step: str) -> None:
    io = parser.add_argument_group("tables")
    io.add_argument("--input", required=True, help="input table: Delta/Parquet/CSV path or catalog table name")
    io.add_argument("--input-format", choices=["delta", "parquet", "csv", "table"],
                    help="input format (default: detected from the path)")
    io.add_argument("--schema", required=True, help="schema file (YAML/JSON) declaring the public domain")
    _scope_args(io)
    io.add_argument("--output", required=step != "measure",
                    help="synthetic Delta table: a path or a catalog table name")
    io.add_argument("--persons-output", help="a people schema: the synthetic persons' Delta table (a path or a "
                                             "catalog table name); their rows go to --output")
    io.add_argument("--parents", help="a people schema's parent-child form: the parent table (one row per id, read "
                                      "like --input, which is then the child table)")
    io.add_argument("--write-mode", "--mode", dest="write_mode", choices=WRITE_MODES, default="error",
                    help="error (default, as Spark's and Delta's): refuse an --output (a --partition of it) that "
                         "holds rows, before any budget is spent; overwrite: replace it; append: add to it")
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
    run.add_argument("--runs-dir", default=None,
                     help="folder of run artifacts: a path or any Hadoop URI (file://, hdfs://, s3a://, abfss://); "
                          "required on a cluster: shared storage (default on a local master: ./runs)")
    privacy = parser.add_argument_group("privacy")
    privacy.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                         help=f"privacy budget epsilon (default: {DEFAULT_EPSILON:g})")
    privacy.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                         help=f"privacy budget delta (default: {DEFAULT_DELTA}; never derived from the data)")
    privacy.add_argument("--model-cells", type=float, default=None,
                         help="selection keeps the junction tree of the measured marginals within this many "
                              f"cells in total, so Private-PGM can run (default {DEFAULT_CELL_BUDGET:.0e}; 0: "
                              "unbounded, PrivSyn's selection; overrides --config)")
    privacy.add_argument("--ledger", help=f"{LEDGER_HELP} holding the dataset's budget "
                                          "(`privsyn-spark budget set`); required unless --no-ledger")
    _dataset_arg(privacy, "dataset key in the ledger (required with --ledger)")
    privacy.add_argument("--no-ledger", action="store_true",
                         help="run without a budget ledger: nothing limits or records what this dataset spends")
    privacy.add_argument("--recharge", action="store_true",
                         help="a run id whose reserved measurements are lost pays for fresh ones (charged again)")
    privacy.add_argument("--privacy-id", metavar="COL[,COL...]",
                         help="id column(s) of a person: the person, not the row, is the privacy unit (default: "
                              "the schema's privacy_unit, else one row); the id is never synthesized")
    privacy.add_argument("--max-rows-per-id", type=_optional_int, metavar="K",
                         help="rows kept per person, chosen at random (the bound every sensitivity follows from; "
                              "default: the schema's, else 1)")
    _people_split_arg(privacy)
    privacy.add_argument("--log-exact-counts", action="store_true",
                         help="operators only: put exact tallies of the private table in the log and errors")
    privacy.add_argument("--dataset-epsilon", type=float, help=argparse.SUPPRESS)  # refused: see budget set
    synth = parser.add_argument_group("synthesis")
    synth.add_argument("--rows", type=int, help="synthetic rows (default: the noisy row count)")
    synth.add_argument("--people", type=_optional_int, metavar="N",
                       help="a people schema: synthetic persons (default: the noisy person count)")
    synth.add_argument("--synthesizer", choices=["gum", "pgm"], default="gum",
                       help="gum: PrivSyn's GUM sharded over Spark (default); pgm: sample the graphical model")
    synth.add_argument("--estimator", choices=["auto", "pgm", "consistency"], default=None,
                       help="target marginals from Private-PGM (pgm), PrivSyn's consistency, or auto: "
                            "Private-PGM when the model fits, else consistency (default; overrides --config)")
    synth.add_argument("--seed", type=int, default=0, help="seed of synthesis (not of the privacy noise)")
    synth.add_argument("--shard-rows", type=int, help="records per GUM shard (default 1,000,000; overrides --config)")
    synth.add_argument("--gum-rounds", type=int, help="GUM reconciliation rounds (cap; default 8; overrides --config)")
    synth.add_argument("--gum-sweeps", type=int,
                       help="GUM Gauss-Seidel sweeps after the rounds: each shard in turn fits the whole "
                            "deficit (P serial rounds per sweep; worth it for few, small shards; default 0; "
                            "overrides --config)")
    run.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS,
                     help=f"cap on the cells of one marginal-engine pass (8 bytes each per Spark task; "
                          f"default {DEFAULT_MAX_CELLS:,}); a larger request stops before any noise is drawn")
    run.add_argument("--keep-scratch", action="store_true",
                     help="keep the run's checkpoint files (removed when the run ends by default)")
    _config_arg(run)
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--label", help="label column for the ML-efficacy metric")
    evaluation.add_argument("--no-evaluate", action="store_true", help="skip the (non-private) metrics")
    _quiet_arg(run)
    _spark_args(parser)
    for action in parser._actions:  # this step's --help lists only what it reads (READ_BY)
        if step not in (*READ_BY.get(action.dest, STEPS), "run"):
            action.help = argparse.SUPPRESS


def _scope_args(group: Any, where: bool = True) -> None:
    group.add_argument("--partition", action="append", default=[], metavar="COL=VALUE",
                       help="scope the run to one partition, repeatable (ANDed): only its files are read on a "
                            "partitioned Delta/Parquet table; the synthetic rows carry the values and replace "
                            "exactly that partition of --output (replaceWhere); an empty value is ignored")
    if where:
        group.add_argument("--where", default=None, metavar="SQL",
                           help="extra Spark SQL predicate on the input rows (narrows the input only)")


def _people_split_arg(group: Any) -> None:
    group.add_argument("--people-split", metavar="PERSONS,DEGREES,ROWS",
                       help="a people schema: the shares of rho of the person table, the degree histogram and the "
                            "row table, positive and summing to 1 (default 0.35,0.05,0.60; people_split in --config)")


def _config_arg(group: Any) -> None:
    group.add_argument("--config", metavar="FILE.yaml",
                       help="rarely used settings (privsyn_spark.config.Settings): sections budget_split, selection, "
                            "estimation, gum, sharding")


def _quiet_arg(group: Any) -> None:
    group.add_argument("-q", "--quiet", action="store_const", const=True, default=None,
                       help="no progress lines on stderr: only warnings and the closing summary line on stdout "
                            "(progress.quiet in --config)")


def _plan_parser(sub: Any) -> None:
    plan = sub.add_parser("plan", help="dry run: the rho split, sigma per release, cells (reads no data, no Spark)",
                          description="Print what a run would release from the schema and the budget alone.")
    plan.add_argument("--schema", required=True, help="schema file (YAML/JSON)")
    plan.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                         help=f"privacy budget epsilon (default: {DEFAULT_EPSILON:g})")
    plan.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                      help=f"privacy budget delta (default: {DEFAULT_DELTA})")
    plan.add_argument("--ledger", help="budget ledger the run would charge (not read by the dry run)")
    _dataset_arg(plan, "dataset key in the ledger")
    plan.add_argument("--no-ledger", action="store_true", help="the run would have no budget ledger")
    plan.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS, help="cap on one engine pass's cells")
    _people_split_arg(plan)
    _config_arg(plan)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of every sub-command (``description``: the command's help text)."""
    parser = argparse.ArgumentParser(prog="privsyn-spark", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"privsyn-spark {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="the log's INFO lines on stderr (-vv: debug); by default only its warnings, besides "
                             "the progress lines and the closing summary on stdout")
    parser.add_argument("--debug", action="store_true", help="print the full trace of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {
        "run": "the whole pipeline: measure, select, estimate, synthesize, write, evaluate, report",
        "measure": "the private part only: marginals, noise, selection -> <run>/measurements",
        "synthesize": "estimate targets and synthesize from a run's measurements, write the Delta table",
        "evaluate": "compare the input and the synthetic table, write the run report",
    }
    for step in STEPS:
        _run_args(sub.add_parser(step, help=helps[step], description=helps[step],
                                 epilog=None if step == "run" else OTHER_STEPS_NOTE), step)
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
    infer.add_argument("--dtype", action="append", default=[], metavar="COLUMN=TYPE",
                       help="a column's type (int, long, double, float, date, timestamp, boolean, string; "
                            "repeatable). A private draft never reads types from the values: CSV columns are "
                            "strings unless declared here; Delta/Parquet keep their declared types")
    infer.add_argument("--spike-share", type=float, help="share above which one value gets its own bin "
                                                        "(default 0.05)")
    infer.add_argument("--privacy-id", metavar="COL[,COL...]",
                       help="id column(s) of a person: the draft proposes max_rows_per_id from a DP quantile of "
                            "rows per id and drafts the columns on the table bounded to it")
    infer.add_argument("--max-rows-per-id", type=_optional_int, metavar="K",
                       help="with --privacy-id: use this bound instead of proposing one")
    infer.add_argument("--non-private", action="store_true",
                       help="read the values and bounds from the data: NOT private")
    infer.add_argument("--ledger", help="budget ledger Delta table: the draft's rho is reserved there (a "
                                        "--non-private draft is recorded there as a non-private read)")
    _dataset_arg(infer, "dataset key in the ledger (required with --ledger; use the same id as the runs on "
                        "this table)")
    infer.add_argument("--run-id", help="id of the draft in the ledger (default: a new random id)")
    infer.add_argument("--no-ledger", action="store_true",
                       help="draft without a budget ledger: nothing limits or records what it spends (or, with "
                            "--non-private, that the dataset was read non-privately)")
    _spark_args(infer)
    budget = sub.add_parser("budget", help="a dataset's total privacy budget in the ledger: set it, show it",
                            description="The ledger holds each dataset's total budget; runs read it.")
    actions = budget.add_subparsers(dest="action", required=True)
    setter = actions.add_parser("set", help="store a dataset's total budget (once; --replace to change it)")
    setter.add_argument("--ledger", required=True, help=LEDGER_HELP)
    _dataset_arg(setter, "dataset key in the ledger, required (what runs pass as --dataset-id)")
    setter.add_argument("--epsilon", type=float, required=True, help="total epsilon of the dataset, all runs")
    setter.add_argument("--delta", type=float, required=True, help="the delta that epsilon is stated at")
    setter.add_argument("--privacy-id", metavar="COL[,COL...]",
                        help="the budget is for a person of these id column(s) (default: one row); runs "
                             "with another privacy unit on this dataset are refused")
    setter.add_argument("--replace", action="store_true",
                        help="change an existing budget (recorded in the ledger; spent stays spent)")
    setter.add_argument("--per-partition", metavar="COL", default=None,
                        help="the budget holds for each partition of COL on its own (parallel composition): every "
                             "run must pass --partition COL=VALUE; sound only when each privacy unit's rows lie in "
                             "one partition (always for one-row units; see docs/scheduling.md)")
    setter.add_argument("--partition-constant-per-person", action="store_true",
                        help="with --privacy-id and --per-partition COL: declare that COL is constant per person "
                             "(recorded in the ledger; without it the combination is refused)")
    _spark_args(setter)
    show = actions.add_parser("show", help="spent and left per dataset (epsilon at its delta) and each release")
    show.add_argument("--ledger", required=True, help=LEDGER_HELP)
    _dataset_arg(show, "one dataset only")
    show.add_argument("--epsilon", type=float, help="forecast: how many more runs at this epsilon fit")
    show.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"the forecast runs' delta "
                                                                        f"(default {DEFAULT_DELTA})")
    _spark_args(show)
    check = actions.add_parser("check", help="would a run fit? exit 3 (with the forecast) if not; reads only "
                                             "the ledger (the DAG's first task)")
    check.add_argument("--ledger", required=True, help=LEDGER_HELP)
    _dataset_arg(check, "dataset key in the ledger, required")
    check.add_argument("--epsilon", type=float, required=True, help="the run's epsilon")
    check.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"the run's delta (default {DEFAULT_DELTA})")
    check.add_argument("--run-id", default="", help="the run's id (a run already charged fits: it is reused)")
    _scope_args(check, where=False)
    _spark_args(check)
    sample = sub.add_parser("sample", help="a new synthetic table from a run's measurements or a saved model: "
                                           "reads no input, charges nothing",
                            description="Re-sample: post-processing of released measurements. No input is read "
                                        "and no budget is spent.")
    source = sample.add_argument_group("fitted model (one of)")
    source.add_argument("--from-run", metavar="RUN_ID",
                        help="a fitted run's id under --runs-dir, or `latest` (the dataset's latest committed run "
                             "of --schema; needs --ledger)")
    source.add_argument("--model", metavar="PATH", help="a saved model (SynthModel.save)")
    sample.add_argument("--schema", help="the run's schema file (required with --from-run)")
    sample.add_argument("--runs-dir", default=None,
                        help="folder of run artifacts (required on a cluster; default on a local master: ./runs)")
    sample.add_argument("--ledger", help="budget ledger: --from-run's measurements are the ones it committed "
                                         "(hash-checked); nothing is charged")
    _dataset_arg(sample, "dataset key in the ledger")
    sample.add_argument("--output", required=True, help="synthetic Delta table: a path or a catalog table name")
    sample.add_argument("--mode", choices=WRITE_MODES[:2], default="error",
                        help="error (default): refuse an --output (a --partition of it) that holds rows; overwrite: "
                             "replace it")
    sample.add_argument("--persons-output", help="a people run: the synthetic persons' Delta table (their rows go "
                                                 "to --output)")
    sample.add_argument("--people", type=_optional_int, metavar="N",
                        help="a people run: synthetic persons (default: the noisy person count)")
    sample.add_argument("--rows", type=int, help="synthetic rows (default: the run's noisy row count)")
    sample.add_argument("--seed", type=int, default=0, help="seed of synthesis (another seed: other rows)")
    sample.add_argument("--synthesizer", choices=["gum", "pgm"],
                        help="gum or pgm (default: a --model's saved choice; gum for --from-run)")
    _scope_args(sample, where=False)
    _config_arg(sample)
    _quiet_arg(sample)
    _spark_args(sample)
    jars = sub.add_parser("jars", help="the Delta jars: the spark-submit line, the cache (--fetch fills it)",
                          description="Print the spark-submit options for Delta and whether the jar cache holds "
                                      "them; --fetch resolves them with Spark's Ivy.")
    jars.add_argument("--fetch", action="store_true", help="resolve the Delta jars from Maven into the cache")
    jars.add_argument("--repositories", help="--fetch: extra Maven repositories (comma-separated URLs)")
    prov = sub.add_parser("provenance", help="list the runs that wrote each version of a synthetic Delta table",
                          description="List every version of a Delta table with the privsyn-spark run that wrote "
                                      "it (run id, epsilon, delta, rho from the commit's userMetadata).")
    prov.add_argument("table", help="Delta table: a path/URI or a catalog table name")
    prov.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    _spark_args(prov)
    return parser


