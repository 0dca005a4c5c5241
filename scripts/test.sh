#!/usr/bin/env bash
# Sets everything up, lints and type-checks, builds the docs site (warnings are errors), then runs the
# whole test suite (slow, cluster and Airflow tests included). Extra arguments go to pytest, e.g.
# scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,airflow
export PATH="$PWD/.venv/bin:$PATH"   # spark-submit and airflow from the venv
.venv/bin/ruff check privsyn_spark tests bench jobs deploy   # lint + import order ([tool.ruff] in pyproject.toml)
.venv/bin/mypy                                              # privsyn_spark/ ([tool.mypy] in pyproject.toml)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"   # docs/ + API reference (not --quiet: it hides the warnings --strict counts)
exec .venv/bin/python -m pytest "$@"
