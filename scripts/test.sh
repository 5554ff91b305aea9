#!/usr/bin/env bash
# The test suite: sets up ./.venv (pinned), lints, then runs every test, real-data ones included.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"` for the quick subset.
# Tests run in PYTEST_WORKERS (default 2) processes; tests sharing an expensive fixture across
# files carry one xdist_group. PYTEST_WORKERS=0 runs them in this process.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -50; exit 1; }
export TF_CPP_MIN_LOG_LEVEL=2
workers="${PYTEST_WORKERS:-2}"
if [ "$workers" = "0" ]; then
  exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
fi
exec .venv/bin/python -m pytest -p no:cacheprovider -n "$workers" --dist loadgroup "$@"
