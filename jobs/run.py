"""spark-submit entry point: the whole pipeline (measure, estimate, synthesize, write, evaluate, report).

    spark-submit --jars <delta jars> jobs/run.py --input ... --schema ... --output ... --run-id ...

Takes the arguments of `privsyn-spark run` (`privsyn-spark run --help`); see deploy/spark/submit.sh.
"""

import os
import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: connect to its JVM first, so the
        from pyspark import SparkContext      # session sees the submitted --master and --conf settings

        SparkContext._ensure_initialized()
    sys.exit(main(["run", *sys.argv[1:]]))
