#!/usr/bin/env bash
# Install what is needed, then check the code (ruff, mypy strict) and run the whole test suite (real
# servers, SQLite and PostgreSQL) on four workers. With arguments, only pytest runs, with them (one process).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ $# -eq 0 ]; then
  .venv/bin/python -m ruff check exchange tests apps simulators bench
  # mypy runs beside the tests (one process, ~10 s of one core, while the tests wait on servers more
  # than they compute); its verdict is awaited and counts as much as theirs.
  mypy_log=$(mktemp)
  .venv/bin/python -m mypy >"$mypy_log" 2>&1 &
  mypy_pid=$!
  # Four workers on CI's two cores: the tests wait on servers, timers and other processes more than
  # they compute (three workers kept 1.3 cores busy, four 1.5). A module's tests stay on one worker,
  # beside its module fixtures; the longest modules go first (tests/conftest.py).
  status=0
  .venv/bin/python -m pytest -n 4 --dist loadfile --durations=30 || status=$?
  mypy_status=0
  wait "$mypy_pid" || mypy_status=$?
  cat "$mypy_log"
  rm -f "$mypy_log"
  if [ "$mypy_status" -ne 0 ]; then
    echo "mypy failed (exit $mypy_status)" >&2
    [ "$status" -ne 0 ] || status=$mypy_status
  fi
  exit "$status"
fi
exec .venv/bin/python -m pytest "$@"
