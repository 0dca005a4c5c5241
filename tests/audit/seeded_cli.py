"""``python -m tests.audit.seeded_cli SEED ARGS...``: ``privsyn-spark ARGS...`` in a process of its own with
the audit's seeded noise (the hook is an in-process switch: nothing outside a test turns it on)."""

from __future__ import annotations

import sys

from privsyn_spark.cli import entry as cli
from privsyn_spark.privacy.noise import seeded_noise_for_tests_only

if __name__ == "__main__":
    with seeded_noise_for_tests_only(int(sys.argv[1])):
        code = cli.main(sys.argv[2:])
    sys.exit(code)
