#!/usr/bin/env bash
# Install what is needed, then check the code (ruff, mypy strict) and run the whole test suite (real
# servers, SQLite and PostgreSQL). With arguments, only pytest runs, with them (a part of the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ $# -eq 0 ]; then
  .venv/bin/python -m ruff check exchange tests apps simulators bench
  .venv/bin/python -m mypy
fi
exec .venv/bin/python -m pytest "$@"
