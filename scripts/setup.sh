#!/usr/bin/env bash
# Sets up everything privsyn-spark needs on a fresh machine (Python >= 3.10, Java 17, Maven):
# a virtualenv in .venv with the package and its extras, the Delta Lake jars resolved from Maven
# Central into ~/.cache/privsyn-spark/jars (Spark's own Ivy resolution is not relied on), and the
# marginal engine's counter jar compiled there with javac.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh dev,airflow
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-dev}"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[${EXTRAS}]"

JARS_DIR="${PRIVSYN_SPARK_JARS_DIR:-$HOME/.cache/privsyn-spark/jars}"
if ls "$JARS_DIR"/delta-spark_*.jar >/dev/null 2>&1; then
  :
elif ! command -v mvn >/dev/null; then
  echo "mvn not found: Spark will try to resolve Delta itself (spark.jars.packages) at session start" >&2
else
  mkdir -p "$JARS_DIR"
  # Spark already ships Hadoop, Scala, Parquet, Jackson, logging and compression jars: skip those.
  mvn -q -B -f deploy/spark/delta-jars.pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$JARS_DIR" \
    -DexcludeGroupIds=org.apache.hadoop,org.scala-lang,org.apache.parquet,org.apache.logging.log4j,com.fasterxml.jackson.core,com.fasterxml.jackson.datatype,org.slf4j,org.xerial.snappy,com.github.luben,commons-logging,commons-pool,com.google.code.findbugs,javax.annotation,io.airlift,org.roaringbitmap,org.locationtech.jts
fi
# The marginal engine's JVM counter: compiled with javac against pyspark's jars (skipped without a JDK).
.venv/bin/python -c "import logging; logging.basicConfig(level=logging.INFO, format='%(message)s')
from privsyn_spark.measure.jvm_counter import counter_jar; from privsyn_spark.runtime.session import jars_dir
counter_jar(jars_dir())"
echo "setup done: .venv ready, jars in $JARS_DIR"
