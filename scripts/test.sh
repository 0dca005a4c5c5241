#!/usr/bin/env bash
# Sets everything up, lints and type-checks, builds the docs site (warnings are errors), then runs the
# whole test suite (slow, cluster and Airflow tests included) in two worker processes (pytest-xdist,
# `-n 2 --dist loadgroup`). Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow";
# a `-n` of the caller's replaces the two workers: scripts/test.sh -n 0 runs the tests in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,airflow
export PATH="$PWD/.venv/bin:$PATH"   # spark-submit and airflow from the venv
# headless Chromium for the report's browser test (tests/evaluate/test_eval_browser.py fails without it)
if [ -z "${PRIVSYN_CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
   && ! command -v google-chrome >/dev/null; then
  as_root=(); [ "$(id -u)" = 0 ] || as_root=(sudo -n)
  if command -v apt-get >/dev/null && "${as_root[@]}" true 2>/dev/null; then
    "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium
  else
    echo "test.sh: no Chromium and no apt-get as root here: the browser test will fail (set PRIVSYN_CHROMIUM)" >&2
  fi
fi
.venv/bin/ruff check privsyn_spark tests bench jobs deploy   # lint + import order ([tool.ruff] in pyproject.toml)
.venv/bin/mypy                                              # privsyn_spark/ ([tool.mypy] in pyproject.toml)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"   # docs/ + API reference (not --quiet: it hides the warnings --strict counts)
workers=(-n 2 --dist loadgroup)
for arg in "$@"; do
  case "$arg" in -n|-n[0-9]*|-nauto|-nlogical|--numprocesses|--numprocesses=*) workers=() ;; esac
done
exec .venv/bin/python -m pytest ${workers[@]+"${workers[@]}"} "$@"
