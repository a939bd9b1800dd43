#!/usr/bin/env bash
# Install what is needed, then check the code (ruff, mypy strict) and run the whole test suite (real
# servers, SQLite and PostgreSQL) on three workers. With arguments, only pytest runs, with them (one process).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ $# -eq 0 ]; then
  .venv/bin/python -m ruff check exchange tests apps simulators bench
  .venv/bin/python -m mypy
  # Three workers on CI's two cores: the tests wait on servers, timers and other processes more than
  # they compute (two workers kept 1.35 cores busy). A module's tests stay on one worker, beside its
  # module fixtures; the longest modules go first (tests/conftest.py).
  exec .venv/bin/python -m pytest -n 3 --dist loadfile --durations=30
fi
exec .venv/bin/python -m pytest "$@"
