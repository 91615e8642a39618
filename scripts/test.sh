#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh) and runs the whole test suite against real
# servers that the session fixtures start. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/lint-imports
set +e
# Three workers share the 2 cores: most integration tests wait on servers, not the CPU.
# tests/worker_groups.py keeps the tests that share a server on one worker. The tests
# marked "serial" measure time against a bound: they run after the workers, alone.
# ORDERED_TEST_WORKERS=0 runs everything in this one process (give -m there, not here).
# The slowest tests are printed at the end of every run: where CI time goes.
workers="${ORDERED_TEST_WORKERS:-3}"
if [ "$workers" = "0" ]; then
  .venv/bin/pytest -q -p no:cacheprovider --durations=30 "$@"
  code=$?
else
  .venv/bin/pytest -q -p no:cacheprovider --durations=30 -n "$workers" --dist loadgroup \
    --no-loadscope-reorder -m "not serial" "$@"
  parallel=$?
  .venv/bin/pytest -q -p no:cacheprovider --durations=5 -m serial "$@"
  alone=$?
  # Exit 5 (no test collected) of one phase is fine when the other ran tests.
  if [ "$parallel" -eq 5 ] && [ "$alone" -ne 5 ]; then parallel=0; fi
  if [ "$alone" -eq 5 ] && [ "$parallel" -ne 5 ]; then alone=0; fi
  code=$parallel
  if [ "$code" -eq 0 ]; then code=$alone; fi
fi
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
if [ "$code" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
