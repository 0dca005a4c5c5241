"""spark-submit entry point: `privsyn-spark budget` (the DAG's budget_check task runs `budget check`).

    spark-submit --jars <delta jars> jobs/budget.py check --ledger L --dataset-id ID --epsilon 1 --run-id R

Reads only the budget ledger; see `privsyn-spark budget --help`.
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["budget", *sys.argv[1:]]))
