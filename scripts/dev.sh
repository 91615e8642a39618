#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), then run `ordered demo` on the local cluster
# (started unless it runs, and stopped again when the demo started it): producers, an
# OrderedConsumer group and a coordinator daemon through expansions, a shrink and a trim,
# with a live view, an end-to-end order check, a summary and a timeline PNG. Extra
# arguments go to `ordered demo` (e.g. --duration 120, --spark, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo needs no JVM jar: skip its Maven build (scripts/test.sh and setup.sh build it).
ORDERED_SETUP_JVM=0 bash scripts/setup.sh
exec .venv/bin/ordered demo "$@"
