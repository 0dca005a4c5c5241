"""``python -m privsyn_spark.cli``: the command line."""

import sys

from privsyn_spark.cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
