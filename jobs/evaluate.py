"""spark-submit entry point: compare the input and the synthetic table, write the run report.

    spark-submit --jars <delta jars> jobs/evaluate.py --input ... --schema ... --output ... --run-id ...

Takes the arguments of `privsyn-spark evaluate` (`privsyn-spark evaluate --help`); see deploy/spark/submit.sh.
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
