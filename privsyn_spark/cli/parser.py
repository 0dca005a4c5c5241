"""The `privsyn-spark` command's argument parser (see :mod:`privsyn_spark.cli`): the run steps' flags here,
the other sub-commands' in :mod:`privsyn_spark.cli.commands`, the options they share in
:mod:`privsyn_spark.cli.flags`."""

from __future__ import annotations

import argparse

from privsyn_spark.cli.commands import add_budget, add_infer_schema, add_jars, add_plan, add_provenance, add_sample
from privsyn_spark.cli.flags import (
    LEDGER_HELP,
    Deprecated,
    config_arg,
    dataset_arg,
    optional_int,
    people_split_arg,
    quiet_arg,
    scope_args,
    spark_args,
)
from privsyn_spark.config import DEFAULT_DELTA, DEFAULT_EPSILON
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET
from privsyn_spark.version import __version__
from privsyn_spark.write.delta_output import WRITE_MODES

STEPS = ("run", "measure", "synthesize", "evaluate")
READ_BY = {
    "output": ("synthesize", "evaluate"), "write_mode": ("synthesize",), "output_partition_by": ("synthesize",),
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


def _run_args(parser: argparse.ArgumentParser, step: str) -> None:
    io = parser.add_argument_group("tables")
    io.add_argument("--input", required=True, help="input table: Delta/Parquet/CSV path or catalog table name")
    io.add_argument("--input-format", choices=["delta", "parquet", "csv", "table"],
                    help="input format (default: detected from the path)")
    io.add_argument("--schema", required=True, help="schema file (YAML/JSON) declaring the public domain")
    scope_args(io)
    io.add_argument("--output", required=step != "measure",
                    help="synthetic Delta table: a path or a catalog table name")
    io.add_argument("--persons-output", help="a people schema: the synthetic persons' Delta table (a path or a "
                                             "catalog table name); their rows go to --output")
    io.add_argument("--parents", help="a people schema's parent-child form: the parent table (one row per id, read "
                                      "like --input, which is then the child table)")
    io.add_argument("--write-mode", "--mode", dest="write_mode", choices=WRITE_MODES, default="error",
                    help="error (default, as Spark's and Delta's): refuse an --output (a --partition of it) that "
                         "holds rows, before any budget is spent; overwrite: replace it; append: add to it")
    io.add_argument("--output-partition-by", default="", metavar="COL[,COL...]",
                    help="partition columns of the synthetic table (on create/overwrite; an append keeps the "
                         "table's own and refuses different ones)")
    io.add_argument("--partition-by", dest="output_partition_by", action=Deprecated, new="--output-partition-by",
                    help=argparse.SUPPRESS)
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
    dataset_arg(privacy, "dataset key in the ledger (required with --ledger)")
    privacy.add_argument("--no-ledger", action="store_true",
                         help="run without a budget ledger: nothing limits or records what this dataset spends")
    privacy.add_argument("--recharge", action="store_true",
                         help="a run id whose reserved measurements are lost pays for fresh ones (charged again)")
    privacy.add_argument("--privacy-id", metavar="COL[,COL...]",
                         help="id column(s) of a person: the person, not the row, is the privacy unit (default: "
                              "the schema's privacy_unit, else one row); the id is never synthesized")
    privacy.add_argument("--max-rows-per-id", type=optional_int, metavar="K",
                         help="rows kept per person, chosen at random (the bound every sensitivity follows from; "
                              "default: the schema's, else 1)")
    people_split_arg(privacy)
    privacy.add_argument("--log-exact-counts", action="store_true",
                         help="operators only: put exact tallies of the private table in the log and errors")
    privacy.add_argument("--dataset-epsilon", type=float, help=argparse.SUPPRESS)  # refused: see budget set
    synth = parser.add_argument_group("synthesis")
    synth.add_argument("--rows", type=int, help="synthetic rows (default: the noisy row count)")
    synth.add_argument("--people", type=optional_int, metavar="N",
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
    config_arg(run)
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument("--label", help="label column for the ML-efficacy metric")
    evaluation.add_argument("--no-evaluate", action="store_true", help="skip the (non-private) metrics")
    quiet_arg(run)
    spark_args(parser)
    for action in parser._actions:  # this step's --help lists only what it reads (READ_BY)
        if step not in (*READ_BY.get(action.dest, STEPS), "run"):
            action.help = argparse.SUPPRESS


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
    add_plan(sub)
    add_infer_schema(sub)
    add_budget(sub)
    add_sample(sub)
    add_jars(sub)
    add_provenance(sub)
    return parser
