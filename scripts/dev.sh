#!/usr/bin/env bash
# The main job: set up, start the local cluster (real Kafka + ZooKeeper) unless it is
# already running, then run the coordinator daemon in the foreground (Ctrl-C stops the
# daemon; `ordered cluster down` stops the cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if .venv/bin/ordered cluster status >/dev/null 2>&1; then
  .venv/bin/ordered cluster status
else
  .venv/bin/ordered cluster up
fi
exec .venv/bin/ordered coordinator "$@"
