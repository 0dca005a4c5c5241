#!/usr/bin/env bash
# Submits one privsyn-spark step (jobs/<step>.py) with spark-submit, with the Delta jars and the
# privsyn_spark package for the executors.
#
#   deploy/spark/submit.sh STEP [privsyn-spark arguments...]
#   STEP: run | measure | synthesize | evaluate
#   e.g. SPARK_MASTER=spark://host:7077 deploy/spark/submit.sh run --input s3a://b/t --schema t.yaml \
#          --output s3a://b/synthetic --epsilon 1 --run-id 2024-06-01 --runs-dir s3a://b/privsyn/runs \
#          --ledger s3a://b/privsyn/ledger --dataset-id t
#
# Environment:
#   SPARK_MASTER              master URL (default local[*])
#   SPARK_DEPLOY_MODE         client (default) or cluster
#   SPARK_SUBMIT              the spark-submit to use (default: spark-submit on PATH)
#   PRIVSYN_SPARK_PROPERTIES  properties file (default deploy/spark/spark-defaults.conf; "none": Spark's own)
#   PRIVSYN_SPARK_JARS_DIR    Delta jars resolved by scripts/setup.sh with Maven (default
#                             ~/.cache/privsyn-spark/jars); without them --packages asks Maven for $PRIVSYN_SPARK_PACKAGES
#   PRIVSYN_COUNTER_JAR       the marginal engine's counter jar (default: the one scripts/setup.sh built into
#                             this checkout's package, privsyn_spark/measure/jvm/privsyn-spark-counter.jar)
#   PRIVSYN_SPARK_PACKAGES    Maven coordinates of Delta (default io.delta:delta-spark_4.2_2.13:4.4.0)
#   PRIVSYN_PY_FILES          zip/wheel of privsyn_spark for the executors' --py-files; "build" (default)
#                             zips this checkout's package; "none" when every node has it installed
#   PRIVSYN_SPARK_LOG4J       the driver's log4j2 configuration (default deploy/spark/log4j2.properties: Spark's
#                             own loggers at WARN; "none": Spark's default, every task at INFO)
#   PRIVSYN_SUBMIT_ARGS       extra spark-submit options, word-split (e.g. "--conf spark.executor.memory=2g")
#
# --py-files ships privsyn_spark's own (pure Python) code only: the executors' Python still needs its
# dependencies (numpy, pandas, pyarrow, pyyaml, opendp); see deploy/spark/NOTES.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

if [ $# -lt 1 ]; then
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
STEP="$1"; shift
case "$STEP" in
  run|measure|synthesize|evaluate) ;;
  *) echo "submit.sh: unknown step '$STEP' (run, measure, synthesize, evaluate)" >&2; exit 2 ;;
esac
APP="$REPO/jobs/$STEP.py"

SUBMIT="${SPARK_SUBMIT:-spark-submit}"
ARGS=(--master "${SPARK_MASTER:-local[*]}" --deploy-mode "${SPARK_DEPLOY_MODE:-client}" --name "privsyn-$STEP")

PROPS="${PRIVSYN_SPARK_PROPERTIES:-$HERE/spark-defaults.conf}"
if [ "$PROPS" != "none" ]; then
  ARGS+=(--properties-file "$PROPS")
fi

LOG4J="${PRIVSYN_SPARK_LOG4J:-$HERE/log4j2.properties}"
if [ "$LOG4J" != "none" ]; then
  ARGS+=(--conf "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:$LOG4J")
fi

JARS_DIR="${PRIVSYN_SPARK_JARS_DIR:-$HOME/.cache/privsyn-spark/jars}"
COUNTER_JAR="${PRIVSYN_COUNTER_JAR:-$REPO/privsyn_spark/measure/jvm/privsyn-spark-counter.jar}"
JARS=()
if ls "$JARS_DIR"/delta-spark_*.jar >/dev/null 2>&1; then
  # the Delta jars (older counter builds in that cache are left out)
  while IFS= read -r jar; do JARS+=("$jar"); done < <(ls "$JARS_DIR"/*.jar | grep -v '/privsyn-spark-counter-[^/]*$')
else
  ARGS+=(--packages "${PRIVSYN_SPARK_PACKAGES:-io.delta:delta-spark_4.2_2.13:4.4.0}")
fi
if [ -f "$COUNTER_JAR" ]; then
  JARS+=("$COUNTER_JAR")
fi
if [ ${#JARS[@]} -gt 0 ]; then
  ARGS+=(--jars "$(IFS=,; echo "${JARS[*]}")")
fi

PY_FILES="${PRIVSYN_PY_FILES:-build}"
if [ "$PY_FILES" = "build" ]; then
  BUILD_DIR="$(mktemp -d)"
  trap 'rm -rf "$BUILD_DIR"' EXIT
  PY_FILES="$BUILD_DIR/privsyn_spark.zip"
  PYTHON="${PYSPARK_PYTHON:-python3}"
  "$PYTHON" - "$REPO" "$PY_FILES" <<'PY'
import sys, zipfile
from pathlib import Path
repo, out = Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted((repo / "privsyn_spark").rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".jar":  # the jar goes by --jars
            z.write(f, f.relative_to(repo))
PY
fi
if [ "$PY_FILES" != "none" ]; then
  ARGS+=(--py-files "$PY_FILES")
fi

# shellcheck disable=SC2206  # word splitting of the extra options is intended
EXTRA=(${PRIVSYN_SUBMIT_ARGS:-})
"$SUBMIT" "${ARGS[@]}" "${EXTRA[@]}" "$APP" "$@"
