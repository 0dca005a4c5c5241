#!/usr/bin/env bash
# Sets up everything privsyn-spark needs on a fresh machine (Python >= 3.10, a JDK 17+ with javac,
# Maven, Maven Central reachable):
# - a virtualenv in .venv with the package, its `spark` extra (pyspark, delta-spark) and the extras asked
#   for, at the exact versions of constraints.txt
#   (PRIVSYN_CONSTRAINTS=none: the newest versions pyproject.toml's ranges allow);
# - the Delta Lake jars matching the installed pyspark/delta-spark, resolved with Maven into
#   ~/.cache/privsyn-spark/jars (without Maven: once, with Spark's Ivy, `privsyn-spark jars --fetch`);
# - the marginal engine's counter jar: the Maven module jvm/ built (and its JUnit tests run) against
#   the installed pyspark, copied into the package (privsyn_spark/measure/jvm/privsyn-spark-counter.jar);
# - the local driver's class-data archive in the same cache (`privsyn-spark jars --class-archive`).
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh dev,airflow
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-dev}"
PY="${PYTHON:-python3}"
CONSTRAINTS="${PRIVSYN_CONSTRAINTS:-constraints.txt}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
if [ "$CONSTRAINTS" = "none" ]; then
  "${PIP[@]}" -e ".[spark,${EXTRAS}]"
else
  "${PIP[@]}" -c "$CONSTRAINTS" -e ".[spark,${EXTRAS}]"
fi
SPARK_VERSION="$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')"
SPARK_MINOR="${SPARK_VERSION%.*}"
DELTA_VERSION="$(.venv/bin/python -c 'from privsyn_spark.runtime.session import DELTA_JAR_VERSION as v; print(v)')"

JARS_DIR="${PRIVSYN_SPARK_JARS_DIR:-$HOME/.cache/privsyn-spark/jars}"
if ls "$JARS_DIR"/delta-spark_"${SPARK_MINOR}"_2.13-"${DELTA_VERSION}".jar >/dev/null 2>&1; then
  :
elif ! command -v mvn >/dev/null; then
  # once, with Spark's Ivy: JVMs that each resolve spark.jars.packages at the same moment (the test
  # command's two workers) can corrupt the shared Ivy cache
  echo "mvn not found: resolving the Delta jars with Spark's Ivy (privsyn-spark jars --fetch)" >&2
  PRIVSYN_SPARK_JARS_DIR="$JARS_DIR" .venv/bin/privsyn-spark jars --fetch >/dev/null
else
  mkdir -p "$JARS_DIR"
  # Spark already ships Hadoop, Scala, Parquet, Jackson, logging and compression jars: skip those.
  mvn -q -B -f deploy/spark/delta-jars.pom.xml dependency:copy-dependencies \
    -Dspark.minor="$SPARK_MINOR" -Ddelta.version="$DELTA_VERSION" \
    -DincludeScope=runtime -DoutputDirectory="$JARS_DIR" \
    -DexcludeGroupIds=org.apache.hadoop,org.scala-lang,org.apache.parquet,org.apache.logging.log4j,com.fasterxml.jackson.core,com.fasterxml.jackson.datatype,org.slf4j,org.xerial.snappy,com.github.luben,commons-logging,commons-pool,com.google.code.findbugs,javax.annotation,io.airlift,org.roaringbitmap,org.locationtech.jts
fi

# The marginal engine's JVM counter: built with Maven (its JUnit tests run) against this pyspark.
if command -v mvn >/dev/null && command -v javac >/dev/null; then
  SPARK_40=()
  if [ "$SPARK_MINOR" = "4.0" ]; then SPARK_40=(-Dspark-4.0); fi
  mvn -q -B -f jvm/pom.xml -Dspark.version="$SPARK_VERSION" ${SPARK_40[@]+"${SPARK_40[@]}"} package
  mkdir -p privsyn_spark/measure/jvm
  cp jvm/target/privsyn-spark-counter.jar privsyn_spark/measure/jvm/privsyn-spark-counter.jar
else
  echo "no JDK (javac) or Maven: the counter jar is not built; the marginal engine will count in Python workers" >&2
fi
# The local driver's class-data archive (once per java, pyspark and driver memory: a run on the bundled sample,
# ~40 s): local sessions started here then load Spark's classes from it, ~2-3 s sooner.
if command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ]; then
  PRIVSYN_SPARK_JARS_DIR="$JARS_DIR" .venv/bin/privsyn-spark jars --class-archive >/dev/null \
    || echo "the class archive was not built: local sessions start without it" >&2
fi
echo "setup done: .venv ready (pyspark $SPARK_VERSION, Delta jars $DELTA_VERSION), Delta jars in $JARS_DIR"
