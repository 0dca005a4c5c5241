"""The building blocks of the `privsyn-spark` parser's options that several sub-commands share (the Spark
options, the dataset key, a run's scope, --config, --quiet; see :mod:`privsyn_spark.cli.parser`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

LEDGER_HELP = "budget ledger Delta table (a path, e.g. runs/ledger, or a persistent catalog's table)"


class Deprecated(argparse.Action):
    """An old spelling of an option: stores into the new one's destination and says to use the new name."""

    def __init__(self, *args: Any, new: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"privsyn-spark: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def dataset_arg(group: Any, help: str) -> None:
    """``--dataset-id`` (the dataset's key in the ledger) and its deprecated spelling ``--dataset``."""
    group.add_argument("--dataset-id", help=help)
    group.add_argument("--dataset", dest="dataset_id", action=Deprecated, new="--dataset-id", help=argparse.SUPPRESS)


def optional_int(text: str) -> int | None:
    """An int option where an empty value (a DAG param left empty) means "not given"."""
    return int(text) if text.strip() else None


def spark_args(parser: argparse.ArgumentParser) -> None:
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


def scope_args(group: Any, where: bool = True) -> None:
    group.add_argument("--partition", action="append", default=[], metavar="COL=VALUE",
                       help="scope the run to one partition, repeatable (ANDed): only its files are read on a "
                            "partitioned Delta/Parquet table; the synthetic rows carry the values and replace "
                            "exactly that partition of --output (replaceWhere); an empty value is ignored")
    if where:
        group.add_argument("--where", default=None, metavar="SQL",
                           help="extra Spark SQL predicate on the input rows (narrows the input only)")


def people_split_arg(group: Any) -> None:
    group.add_argument("--people-split", metavar="PERSONS,DEGREES,ROWS",
                       help="a people schema: the shares of rho of the person table, the degree histogram and the "
                            "row table, positive and summing to 1 (default 0.35,0.05,0.60; people_split in --config)")


def config_arg(group: Any) -> None:
    group.add_argument("--config", metavar="FILE.yaml",
                       help="rarely used settings (privsyn_spark.config.Settings): sections budget_split, selection, "
                            "estimation, gum, sharding")


def quiet_arg(group: Any) -> None:
    group.add_argument("-q", "--quiet", action="store_const", const=True, default=None,
                       help="no progress lines on stderr: only warnings and the closing summary line on stdout "
                            "(progress.quiet in --config)")
