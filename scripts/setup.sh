#!/usr/bin/env bash
# Sets up everything from nothing: a virtualenv at .venv with the package and its
# extras, then the Kafka and ZooKeeper jars from Maven Central into the cache.
# Idempotent; a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "setup: $PY not found; install Python 3.11+" >&2; exit 1; }
# Java 17 runs Kafka and ZooKeeper; Maven fetches their jars. Install them when missing
# and we may (root with apt-get, as on a fresh CI machine).
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
# A C compiler and the Python headers build OrderedProducer's compiled send path
# (ordered/_fastproduce.c); without them it is skipped and the pure-Python path runs.
# Optional: installed with apt-get when we may, else only a note.
optional=()
command -v cc >/dev/null || optional+=(gcc)
"$PY" -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || optional+=(python3-dev)
if [ ${#optional[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing+=("${optional[@]}")
  else
    echo "setup: note: ${optional[*]} missing; OrderedProducer uses its pure-Python send path" >&2
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "setup: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.ordered-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
  || [ ordered/_fastproduce.c -nt "$stamp" ] || [ ordered/_fastconsume.c -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev,spark]'
  touch "$stamp"
fi
.venv/bin/python -c 'import ordered.producer as p; print("setup: OrderedProducer send path:", "compiled" if p.COMPILED else "pure Python (no C compiler or headers)")'

# Resolve the pinned Kafka and ZooKeeper jars (a no-op when the cache holds them).
.venv/bin/ordered cluster fetch
# Spark's own Kafka connector, the yardstick of benchmarks/bench_spark.py (same cache).
.venv/bin/python -c "from ordered.devcluster import jars; jars.resolve('spark-kafka', progress=print)"
# Everything JVM (Kafka's tools and the JVM plugins' jar) is for the tests, the JVM
# benchmark and JVM users, not for the demo: ORDERED_SETUP_JVM=0 (scripts/dev.sh) skips
# it, so a newcomer's first demo does not wait for a Maven build.
if [ "${ORDERED_SETUP_JVM:-1}" = 0 ]; then
  echo "setup: JVM plugins' jar skipped (ORDERED_SETUP_JVM=0; bash scripts/setup.sh builds it)"
else
  # Kafka's tools (ConsoleProducer) with kafka-clients 4.x: the JVM tests' classpath
  # (tests/jvm_helpers.py), tests/integration/test_jvm_kafka_tools.py and
  # benchmarks/bench_jvm.py. Fetched here, so that no test resolves it from Maven mid-run.
  .venv/bin/python -c "from ordered.devcluster import jars; jars.resolve('kafka-tools', progress=print)"
  # Kafka Streams (tests/integration/test_jvm_streams.py), fetched here for the same reason.
  .venv/bin/python -c "from ordered.devcluster import jars; jars.resolve('kafka-streams', progress=print)"
  # A Kafka Connect worker and its file connectors (tests/integration/test_jvm_connect.py).
  .venv/bin/python -c "from ordered.devcluster import jars; jars.resolve('kafka-connect', progress=print)"
  # The JVM plugins' shaded jar (jvm/target/ordered-kafka-jvm.jar), from Maven Central only,
  # rebuilt only when a jvm/ source is newer than it. One quick Java test (both Surefire runs:
  # kafka-clients 4.1 and 3.9) after a build also fetches the test runner's own artifacts, so
  # that `mvn -o test` (tests/integration/test_jvm_maven.py) then runs offline.
  jar=jvm/target/ordered-kafka-jvm.jar
  if ! command -v mvn >/dev/null; then
    echo "setup: note: Maven missing; the JVM plugins' jar is not built" >&2
  elif [ ! -f "$jar" ] || [ -n "$(find jvm/pom.xml jvm/src -newer "$jar" -print -quit)" ]; then
    mvn -B -q -f jvm/pom.xml -DskipTests package
    mvn -B -q -f jvm/pom.xml surefire:test@default-test surefire:test@kafka-clients-3.9 -Dtest=SettingsTest
    echo "setup: built $jar"
  fi
  # The JVM Spark source's jar (jvm-spark/target/ordered-kafka-spark.jar, used with the jar
  # above on spark.jars; docs/spark-jvm.md). Spark's classes are `provided`, fetched from Maven
  # Central without their dependencies (about 40 MB, once); rebuilt only when a jvm-spark/
  # source or the plugins' jar is newer than it.
  spark_jar=jvm-spark/target/ordered-kafka-spark.jar
  if command -v mvn >/dev/null && [ -f "$jar" ] && { [ ! -f "$spark_jar" ] \
      || [ -n "$(find jvm-spark/pom.xml jvm-spark/src "$jar" -newer "$spark_jar" -print -quit)" ]; }; then
    mvn -B -q -f jvm-spark/pom.xml package
    echo "setup: built $spark_jar"
  fi
  # The same source for Spark 3.5 (Scala 2.12; profile spark-3.5):
  # jvm-spark/target/ordered-kafka-spark-3.5.jar, rebuilt when stale as the one above.
  spark35_jar=jvm-spark/target/ordered-kafka-spark-3.5.jar
  if command -v mvn >/dev/null && [ -f "$jar" ] && { [ ! -f "$spark35_jar" ] \
      || [ -n "$(find jvm-spark/pom.xml jvm-spark/src "$jar" -newer "$spark35_jar" -print -quit)" ]; }; then
    mvn -B -q -f jvm-spark/pom.xml -P spark-3.5 package
    echo "setup: built $spark35_jar"
  fi
  # Spark 3.5's Kafka connector (cache, as spark-kafka above) and a second environment,
  # .venv-spark35, with pyspark 3.5 only: tests/spark/test_jvm_spark_source_lines.py runs
  # its PySpark driver there (the topic is written from .venv). About 320 MB to download
  # once; a re-run only checks the stamp.
  if command -v mvn >/dev/null; then
    .venv/bin/python -c "from ordered.devcluster import jars; jars.resolve('spark-kafka-3.5', progress=print)"
  fi
  pyspark35=3.5.7
  [ -x .venv-spark35/bin/python ] || "$PY" -m venv .venv-spark35
  [ -f .venv-spark35/.gitignore ] || echo '*' > .venv-spark35/.gitignore  # not for git
  if [ ! -f ".venv-spark35/.pyspark-$pyspark35" ]; then
    .venv-spark35/bin/python -m pip install --quiet --disable-pip-version-check "pyspark==$pyspark35"
    touch ".venv-spark35/.pyspark-$pyspark35"
    echo "setup: .venv-spark35 has pyspark $pyspark35"
  fi
fi
echo "setup: done in $(( $(date +%s) - start )) s"
