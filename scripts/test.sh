#!/usr/bin/env bash
# Install what is needed, then run the whole test suite (real servers, SQLite and PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
