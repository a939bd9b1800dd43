"""A gateway's cold start after a crash imports what recovery needs and nothing more.

A real ``exchange gateway`` process (a fresh interpreter, not the test suite's zygote) restarts on a
store with a run in flight, configured with the HTTP API, the OPC UA server of runs and an OPC UA
device with a tag, and with ``PYTHONPROFILEIMPORTTIME`` set: the interpreter writes a line to stderr
as each module is imported, in the same stream as the gateway's log. Every module imported before
the first "recovering run" line is on the way to the first resumed step: none of the surfaces'
libraries (FastAPI, uvicorn, asyncua), no device driver (the device's settings and its tags'
addresses are checked without one), no HTTP client, no cron parser, no other backend's SQL dialect.
The API's port is bound and answers before recovery (a request made then is answered once the API
serves, after it); the OPC UA server serves after recovery; a port in use still stops the gateway
before it runs anything.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, wait_until

APP = """
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.steps.sleep import sleep_chunked


@step(name="cold.tick")
def tick(i):
    return i


@workflow(name="cold.loop")
def loop(n):
    for i in range(n):
        tick(i)
        sleep_chunked(50, 50)
    return n
"""

PLANT_DEVICE = """
[devices.line]
driver = "opcua"
url = "opc.tcp://127.0.0.1:1/line/"

[tags."[plant]Line1/Tank/Level"]
device = "line"
address = "ns=2;s=Line1.Tank.Level"
type = "Float64"
"""

# Not one module of these may be imported before the gateway resumes its runs.
NOT_FOR_RECOVERY = (
    "fastapi", "starlette", "uvicorn", "pydantic", "prometheus_client",  # the HTTP API and its console
    "asyncua", "cryptography",  # the OPC UA server of runs and the OPC UA device's driver (no run uses it)
    "pymodbus", "pycomm3",  # drivers of protocols the config does not name
    "requests", "urllib3",  # the attention webhook's client (no webhook configured)
    "croniter", "dateutil",  # schedules' cron expressions (no schedule configured)
    "sqlalchemy.orm", "sqlalchemy.ext",  # the store uses SQLAlchemy Core only
    "exchange._api.app", "exchange._api.server", "exchange._opcua_server.server", "exchange._plant.runner",
)
OTHER_DIALECT = {"sqlite": "sqlalchemy.dialects.postgresql", "postgresql": "sqlalchemy.dialects.sqlite"}
_IMPORTED = re.compile(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)\s*$")


def _imports_before(log: str, mark: str) -> tuple[list[str], list[str]]:
    """The modules the log says were imported before the first line containing ``mark``, and after."""
    before: list[str] = []
    after: list[str] = []
    seen = False
    for line in log.splitlines():
        seen = seen or mark in line
        found = _IMPORTED.match(line)
        if found:
            (after if seen else before).append(found.group(1))
    assert seen, f"no {mark!r} line in the gateway's log:\n{log[-3000:]}"
    return before, after


def _packages_of(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` that some of ``modules`` belong to."""
    return sorted({package for package in packages for module in modules
                   if module == package or module.startswith(package + ".")})


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_cold_restart_imports_only_what_recovery_needs_and_serves_the_surfaces_after(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, exchange_zygote: ForkServer) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    env = ExchangeEnv.create(tmp_path / "plant", store_url=url, zygote=exchange_zygote)
    env.write_app("cold", APP)
    # An OPC UA device and its tags: checked at start-up without asyncua (no run uses them here).
    env.config_path.write_text(env.config_path.read_text() + PLANT_DEVICE, encoding="utf-8")
    with env.gateway() as first:
        first.start()
        (run_id,) = env.start_runs("cold.loop", [{"n": 100_000}])
        wait_until(lambda: len(env.show(run_id)["steps"]) >= 4, 30, message="the run's first steps")
        first.kill9()
    # A fresh interpreter (not forked from the zygote, which imported everything already).
    traced = Gateway(env, extra_args=("--api", "127.0.0.1:0", "--opcua-server", "opc.tcp://127.0.0.1:0/cold/"),
                     name="traced")
    with traced:
        traced.spawn(extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
        listening = wait_until(lambda: re.search(r"gateway API listening on (\S+)", traced.log_text()), 60,
                               message=lambda: f"the API's address\n{traced.log_text()[-3000:]}")
        # Asked at once: the port is bound before recovery, the answer comes once the API serves.
        assert requests.get(listening.group(1) + "/healthz", timeout=60).status_code == 200
        traced.wait_ready(timeout_s=90)
        steps_at_restart = len(env.show(run_id)["steps"])
        wait_until(lambda: len(env.show(run_id)["steps"]) > steps_at_restart, 30, message="the resumed run's steps")
        log = traced.log_text()
        traced.kill9()
    before, after = _imports_before(log, "recovering run")
    assert "exchange._engine.gateway.dispatcher" in before and "sqlalchemy" in before  # the trace covers the start
    unneeded = _packages_of(before, (*NOT_FOR_RECOVERY, OTHER_DIALECT[backend]))
    assert unneeded == [], f"imported before the runs were resumed: {', '.join(unneeded)}"
    assert {"uvicorn", "asyncua"} <= set(after)  # the surfaces came up, after the recovery
    api_line = log.index("gateway API listening on")
    assert api_line < log.index("recovering run") < log.index("gateway OPC UA server listening on")
    assert re.search(r"start-up: imports \d+ ms, config \d+ ms, store \d+ ms, apps \d+ ms, services \d+ ms, "
                     r"recovery \d+ ms \(began \d+\.\d+\)", log), log[-3000:]
