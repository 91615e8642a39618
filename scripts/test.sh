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
# tests/conftest.py groups the tests that share a server; ORDERED_TEST_WORKERS=0 runs
# everything in this process. The slowest tests are printed at the end of every run:
# where CI time goes.
workers="${ORDERED_TEST_WORKERS:-3}"
parallel=()
if [ "$workers" != "0" ]; then
  parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
fi
.venv/bin/pytest -q -p no:cacheprovider --durations=30 "${parallel[@]}" "$@"
code=$?
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
if [ "$code" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
