#!/usr/bin/env bash
# The demo: a simulated plant (Modbus, OPC UA, EtherNet/IP servers), a gateway, and a batch workflow
# that fills, mixes and heats, confirming its writes; an operator HOLDs and RESUMEs it on the way.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python -m scripts.demo "$@"
