#!/usr/bin/env bash
# Sets everything up and runs the whole test suite (slow, cluster and Airflow tests included).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,airflow
export PATH="$PWD/.venv/bin:$PATH"   # spark-submit and airflow from the venv
exec .venv/bin/python -m pytest "$@"
