"""spark-submit entry point: the private step: marginals, noise, selection -> <runs-dir>/<run-id>/measurements.

    spark-submit --jars <delta jars> jobs/measure.py --input ... --schema ... --output ... --run-id ...

Takes the arguments of `privsyn-spark measure` (`privsyn-spark measure --help`); see deploy/spark/submit.sh.
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["measure", *sys.argv[1:]]))
