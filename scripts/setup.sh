#!/usr/bin/env bash
# Sets up everything from nothing: a virtualenv at .venv with the package and its
# extras, then the Kafka and ZooKeeper jars from Maven Central into the cache.
# Idempotent; a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "setup: $PY not found; install Python 3.11+" >&2; exit 1; }
command -v java >/dev/null || { echo "setup: java not found; install OpenJDK 17 (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.ordered-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev,spark]'
  touch "$stamp"
fi
# Resolve the pinned Kafka and ZooKeeper jars (a no-op when the cache holds them).
.venv/bin/ordered cluster fetch
echo "setup: done in $(( $(date +%s) - start )) s"
