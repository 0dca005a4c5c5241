"""The real ``privsyn-spark`` command with the test-only seeded noise on (the release diff's runs):
``python -m tests.audit.seeded_cli SEED ARGS...`` is ``privsyn-spark ARGS...`` whose every noise draw
comes from ``SeededSamplerForTestsOnly(SEED)`` (``privacy.noise.seeded_noise_for_tests_only``)."""

from __future__ import annotations

import sys

from privsyn_spark import cli
from privsyn_spark.privacy.noise import seeded_noise_for_tests_only

if __name__ == "__main__":
    with seeded_noise_for_tests_only(int(sys.argv[1])):
        code = cli.main(sys.argv[2:])
    sys.exit(code)
