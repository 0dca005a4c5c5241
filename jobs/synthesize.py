"""spark-submit entry point: estimate targets and synthesize from a run's measurements, write the Delta table.

    spark-submit --jars <delta jars> jobs/synthesize.py --input ... --schema ... --output ... --run-id ...

Takes the arguments of `privsyn-spark synthesize` (`privsyn-spark synthesize --help`); see deploy/spark/submit.sh.
"""

import sys

from privsyn_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["synthesize", *sys.argv[1:]]))
