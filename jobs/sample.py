"""spark-submit entry point: `privsyn-spark sample` (the DAG's resample mode): no input read, nothing charged.

    spark-submit --jars <delta jars> jobs/sample.py --from-run latest --ledger L --dataset-id ID \\
        --schema S --output OUT --partition day=2024-01-08

Takes the arguments of `privsyn-spark sample` (`privsyn-spark sample --help`).
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["sample", *sys.argv[1:]]))
