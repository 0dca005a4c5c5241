"""spark-submit entry point: the whole pipeline (measure, estimate, synthesize, write, evaluate, report).

    spark-submit --jars <delta jars> jobs/run.py --input ... --schema ... --output ... --run-id ...

Takes the arguments of `privsyn-spark run` (`privsyn-spark run --help`); see deploy/spark/submit.sh.
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
