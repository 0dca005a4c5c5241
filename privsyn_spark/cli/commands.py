"""The `privsyn-spark` sub-commands beside the run steps (plan, infer-schema, budget, sample, jars,
provenance): each adds its parser to the sub-parsers ``sub`` (see :mod:`privsyn_spark.cli.parser`)."""

from __future__ import annotations

from typing import Any

from privsyn_spark.cli.flags import (
    LEDGER_HELP,
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
from privsyn_spark.write.delta_output import WRITE_MODES


def add_plan(sub: Any) -> None:
    """`plan`: the dry run's options."""
    plan = sub.add_parser("plan", help="dry run: the rho split, sigma per release, cells (reads no data, no Spark)",
                          description="Print what a run would release from the schema and the budget alone.")
    plan.add_argument("--schema", required=True, help="schema file (YAML/JSON)")
    plan.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                      help=f"privacy budget epsilon (default: {DEFAULT_EPSILON:g})")
    plan.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                      help=f"privacy budget delta (default: {DEFAULT_DELTA})")
    plan.add_argument("--ledger", help="budget ledger the run would charge (not read by the dry run)")
    dataset_arg(plan, "dataset key in the ledger")
    plan.add_argument("--no-ledger", action="store_true", help="the run would have no budget ledger")
    plan.add_argument("--max-cells", type=int, default=DEFAULT_MAX_CELLS, help="cap on one engine pass's cells")
    people_split_arg(plan)
    config_arg(plan)


def add_infer_schema(sub: Any) -> None:
    """`infer-schema`: a schema drafted from a table, privately or not."""
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
    infer.add_argument("--max-rows-per-id", type=optional_int, metavar="K",
                       help="with --privacy-id: use this bound instead of proposing one")
    infer.add_argument("--non-private", action="store_true",
                       help="read the values and bounds from the data: NOT private")
    infer.add_argument("--ledger", help="budget ledger Delta table: the draft's rho is reserved there (a "
                                        "--non-private draft is recorded there as a non-private read)")
    dataset_arg(infer, "dataset key in the ledger (required with --ledger; use the same id as the runs on "
                        "this table)")
    infer.add_argument("--run-id", help="id of the draft in the ledger (default: a new random id)")
    infer.add_argument("--no-ledger", action="store_true",
                       help="draft without a budget ledger: nothing limits or records what it spends (or, with "
                            "--non-private, that the dataset was read non-privately)")
    spark_args(infer)


def add_budget(sub: Any) -> None:
    """`budget set`, `budget show` and `budget check`: a dataset's total budget in the ledger."""
    budget = sub.add_parser("budget", help="a dataset's total privacy budget in the ledger: set it, show it",
                            description="The ledger holds each dataset's total budget; runs read it.")
    actions = budget.add_subparsers(dest="action", required=True)
    setter = actions.add_parser("set", help="store a dataset's total budget (once; --replace to change it)")
    setter.add_argument("--ledger", required=True, help=LEDGER_HELP)
    dataset_arg(setter, "dataset key in the ledger, required (what runs pass as --dataset-id)")
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
    spark_args(setter)
    show = actions.add_parser("show", help="spent and left per dataset (epsilon at its delta) and each release")
    show.add_argument("--ledger", required=True, help=LEDGER_HELP)
    dataset_arg(show, "one dataset only")
    show.add_argument("--epsilon", type=float, help="forecast: how many more runs at this epsilon fit")
    show.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"the forecast runs' delta "
                                                                        f"(default {DEFAULT_DELTA})")
    spark_args(show)
    check = actions.add_parser("check", help="would a run fit? exit 3 (with the forecast) if not; reads only "
                                             "the ledger (the DAG's first task)")
    check.add_argument("--ledger", required=True, help=LEDGER_HELP)
    dataset_arg(check, "dataset key in the ledger, required")
    check.add_argument("--epsilon", type=float, required=True, help="the run's epsilon")
    check.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"the run's delta (default {DEFAULT_DELTA})")
    check.add_argument("--run-id", default="", help="the run's id (a run already charged fits: it is reused)")
    scope_args(check, where=False)
    spark_args(check)


def add_sample(sub: Any) -> None:
    """`sample`: a new synthetic table from a fitted run or a saved model."""
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
    dataset_arg(sample, "dataset key in the ledger")
    sample.add_argument("--output", required=True, help="synthetic Delta table: a path or a catalog table name")
    sample.add_argument("--mode", choices=WRITE_MODES[:2], default="error",
                        help="error (default): refuse an --output (a --partition of it) that holds rows; overwrite: "
                             "replace it")
    sample.add_argument("--persons-output", help="a people run: the synthetic persons' Delta table (their rows go "
                                                 "to --output)")
    sample.add_argument("--people", type=optional_int, metavar="N",
                        help="a people run: synthetic persons (default: the noisy person count)")
    sample.add_argument("--rows", type=int, help="synthetic rows (default: the run's noisy row count)")
    sample.add_argument("--seed", type=int, default=0, help="seed of synthesis (another seed: other rows)")
    sample.add_argument("--synthesizer", choices=["gum", "pgm"],
                        help="gum or pgm (default: a --model's saved choice; gum for --from-run)")
    scope_args(sample, where=False)
    config_arg(sample)
    quiet_arg(sample)
    spark_args(sample)


def add_jars(sub: Any) -> None:
    """`jars`: the Delta jars' spark-submit line and cache."""
    jars = sub.add_parser("jars", help="the Delta jars: the spark-submit line, the cache (--fetch fills it)",
                          description="Print the spark-submit options for Delta and whether the jar cache holds "
                                      "them; --fetch resolves them with Spark's Ivy.")
    jars.add_argument("--fetch", action="store_true", help="resolve the Delta jars from Maven into the cache")
    jars.add_argument("--repositories", help="--fetch: extra Maven repositories (comma-separated URLs)")
    jars.add_argument("--class-archive", action="store_true",
                      help="build the local driver's class-data archive into the cache (once: a run on the bundled "
                           "sample; local sessions then start ~2-3 s sooner)")


def add_provenance(sub: Any) -> None:
    """`provenance`: the runs that wrote each version of a synthetic table."""
    prov = sub.add_parser("provenance", help="list the runs that wrote each version of a synthetic Delta table",
                          description="List every version of a Delta table with the privsyn-spark run that wrote "
                                      "it (run id, epsilon, delta, rho from the commit's userMetadata).")
    prov.add_argument("table", help="Delta table: a path/URI or a catalog table name")
    prov.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    spark_args(prov)
