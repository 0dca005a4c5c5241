#!/usr/bin/env bash
# Sets everything up, then runs the whole pipeline on the bundled Adult sample in local mode:
# epsilon = 1, a local Delta table in out/adult_synthetic, artifacts and report in runs/quickstart.
# A local demo, so no budget ledger (--no-ledger); see docs/privacy.md for real runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
exec .venv/bin/privsyn-spark run \
  --input privsyn_spark/sample/adult.csv.gz \
  --schema privsyn_spark/sample/adult.schema.yaml \
  --output out/adult_synthetic --mode overwrite \
  --epsilon 1 --delta 1e-9 \
  --run-id quickstart --runs-dir runs --no-ledger \
  --label income \
  --master "local[2]" "$@"
