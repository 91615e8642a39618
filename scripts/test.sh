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
# The slowest tests, printed at the end of every run: where CI time goes.
.venv/bin/pytest -q -p no:cacheprovider --durations=30 "$@"
code=$?
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
if [ "$code" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
