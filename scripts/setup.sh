#!/usr/bin/env bash
# Make ./.venv with Exchange and its development tools; install the system libraries the tests use.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "Exchange needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

# unixODBC and a real ODBC driver (psqlODBC) for the ODBC path of the db steps; Debian's chromium
# for the console's browser tests (Playwright drives it; no browser download from the internet);
# socat for the Modbus RTU tests (a pty pair stands in for a serial line).
need_apt=()
for pkg in unixodbc odbc-postgresql chromium socat; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "warning: cannot install ${need_apt[*]} (no apt-get); the ODBC, browser and RTU tests will fail" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.exchange-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
# Bytecode for the project's own modules (pip compiled the installed packages'): with
# PYTHONDONTWRITEBYTECODE set, as on some CI machines, every process would compile them again
# (about 100 ms a process). compileall skips what is up to date.
.venv/bin/python -m compileall -q exchange simulators tests apps bench >/dev/null \
  || echo "warning: some modules did not compile (pytest will say which)" >&2
