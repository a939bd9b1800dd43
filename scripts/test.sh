#!/usr/bin/env bash
# Install what is needed, then check the code (ruff, mypy strict) and run the whole test suite (real
# servers, SQLite and PostgreSQL) on two workers. With arguments, only pytest runs, with them (one process).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ $# -eq 0 ]; then
  .venv/bin/python -m ruff check exchange tests apps simulators bench
  .venv/bin/python -m mypy
  # Two workers (CI has two cores); a module's tests stay on one worker, beside its module fixtures.
  exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=30
fi
exec .venv/bin/python -m pytest "$@"
