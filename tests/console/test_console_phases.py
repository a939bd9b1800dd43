"""A phase a run commands and the units runs hold, on every surface of one real gateway process
(API, console and OPC UA server of runs) against the simulator's PLC over Modbus: ``GET
/api/v1/phases`` (the PLC's state, the owner, the commanding run), ``exchange phases`` and
``exchange show``, the console's run page in a real headless Chromium (the phase's state changing
live, a hold by the PLC shown), the OPC UA server's ``Phase`` variable read by a real asyncua
client; ``GET /api/v1/units``, ``show``'s units, the console's units page, the attention list and
``Units/<unit>/Holder`` as a holder releases its unit to the run waiting; and the PLC down: the
state unknown with the reason, not an error answer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from exchange._auth.roles import ROLES
from simulators.engine import SimulatedPlant
from tests.api.conftest import PASSWORD, ApiGateway
from tests.console.conftest import screenshot
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, toml_value, wait_until
from tests.opcua_server.test_opcua_server import RunsServer, _read_or_none
from tests.phases.conftest import PHASE, plant_document, sections_for

APP = f'''
from exchange.errors import StopRequested
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import control, phase, units


@workflow(name="surfaces.charge")
def charge(target_l=3.0):
    return phase.run({PHASE!r}, params={{"target_l": target_l}}, poll_ms=50)


@workflow(name="surfaces.hold")
def hold(names):
    try:
        with units.acquire(*names):
            while True:  # until a STOP
                control.checkpoint(wait_ms=50)
    except StopRequested:
        return "stopped"
'''
UNITS = "\n[units]\nwait_attention_s = 1\n\n[units.R1]\nclass = \"reactor\"\n\n[units.TK2]\nclass = \"tank\"\n"
_API = re.compile(r"gateway API listening on (\S+)")
_OPCUA = re.compile(r"gateway OPC UA server listening on (\S+)")


def toml_sections(document: dict[str, Any]) -> str:
    """``[section."name"]`` tables (and their sub-tables) of a config document's sections."""
    lines: list[str] = []
    for section, entries in document.items():
        for name, entry in entries.items():
            lines.append(f"\n[{section}.{toml_value(name)}]")
            lines += [f"{key} = {toml_value(value)}" for key, value in entry.items() if not isinstance(value, dict)]
            for key, table in entry.items():
                if isinstance(table, dict):
                    lines.append(f"\n[{section}.{toml_value(name)}.{key}]")
                    lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def plant() -> Iterator[SimulatedPlant]:
    """The phase runs until a test ends it (``finish_phase``)."""
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as sim:
        yield sim


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer,
             plant: SimulatedPlant) -> Iterator[tuple[ApiGateway, RunsServer]]:
    """One gateway commanding ``plant``'s phase, serving the API, the console and the OPC UA server."""
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("phase-surfaces")), zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write(toml_sections(sections_for(plant)))
        file.write(UNITS)
    env.write_app("surfaces_app", APP)
    tokens: dict[str, str] = {}
    for role in ROLES:
        env.cli("users", "add", f"{role}-user", "--role", role, input_text=PASSWORD + "\n").check()
        tokens[role] = env.cli("tokens", "create", f"{role}-token", "--role", role).check().stdout.strip()
    with env.gateway("--api", "127.0.0.1:0", "--opcua-server", "opc.tcp://127.0.0.1:0/exchange/") as gateway:
        gateway.start(timeout_s=60)
        urls: dict[str, str] = {}

        def listening() -> bool:
            log = gateway.log_text()
            for name, pattern in (("api", _API), ("opcua", _OPCUA)):
                found = pattern.findall(log)
                if found:
                    urls[name] = found[0]
            return len(urls) == 2

        wait_until(listening, 30, message=lambda: f"the API's and the OPC UA server's addresses\n{gateway.log_text()}")
        yield ApiGateway(env, gateway, urls["api"], tokens), RunsServer(env, gateway, urls["opcua"])


@pytest.fixture(scope="module")
def console(surfaces: tuple[ApiGateway, RunsServer]) -> ApiGateway:
    """The gateway the console tests' ``visit`` opens pages of."""
    return surfaces[0]


def _phases(api: ApiGateway) -> list[dict[str, Any]]:
    answer = api.call("GET", "/api/v1/phases", "viewer")
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()
    return listed


def test_a_phase_a_run_commands_on_every_surface(
        surfaces: tuple[ApiGateway, RunsServer], plant: SimulatedPlant, visit: Callable[..., Page]) -> None:
    api, opcua = surfaces
    env = api.env
    (run_id,) = env.start_runs("surfaces.charge", [{"target_l": 4.0}])
    wait_until(lambda: (api.run(run_id).get("phase") or {}).get("state") == "RUNNING", 20,
               message=lambda: f"the run following its phase: {api.run(run_id)}")

    (listed,) = _phases(api)
    commanding = {"run": run_id, "workflow": "surfaces.charge", "stage": "running", "seen_state": "RUNNING",
                  "held_by": None}
    assert listed == {"phase": PHASE, "unit": None, "state": "RUNNING", "state_number": 2, "state_quality": "Good",
                      "state_error": None, "owner": 1, "owner_quality": "Good", "owned_by": "exchange",
                      "run": commanding}
    assert api.call("GET", "/api/v1/phases").status_code == 401  # rights: read, signed in
    cli = env.cli("phases", "--json")
    assert cli.returncode == 0, cli.stderr
    assert cli.json()[0]["run"] == commanding
    assert f"{run_id} running" in env.cli("phases").stdout
    assert f"phase     {PHASE} RUNNING as last seen (running) since " in env.cli("show", run_id).stdout

    with opcua.client("viewer-user") as client:
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/Phase") == f"{PHASE} RUNNING", 20,
                   message=lambda: f"Phase: {_read_or_none(client, f'Runs/{run_id}/Phase')!r}")

        page = visit("viewer")
        page.goto(f"{api.url}/runs/{run_id}")
        expect(page.locator("#phase-name")).to_have_text(PHASE)
        expect(page.locator("#phase-state")).to_have_text("RUNNING")
        expect(page.locator("#phase-held")).to_be_hidden()
        plant.command_phase(PHASE, "HOLD")  # the PLC holds its phase: the page shows it without a reload
        expect(page.locator("#phase-state")).to_have_text("HELD")
        expect(page.locator("#phase-held")).to_have_text("held by equipment")
        expect(page.locator("#state")).to_have_text("HELD")
        screenshot(page, "run-phase")
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/Phase") == f"{PHASE} HELD", 20, message="HELD")
        assert _phases(api)[0]["run"]["held_by"] == "equipment"

        resumed = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator",
                           json={"cmd": "RESUME", "reason": "ok"})
        assert resumed.status_code == 202, resumed.text
        expect(page.locator("#phase-state")).to_have_text("RUNNING")
        expect(page.locator("#phase-held")).to_be_hidden()
        plant.finish_phase(PHASE)
        wait_until(lambda: api.run(run_id)["status"] == "SUCCESS", 20, message="the run done")
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/Phase") == "", 20, message="Phase emptied")
    assert api.run(run_id)["phase"] is None
    (listed,) = _phases(api)
    assert listed["state"] == "IDLE" and listed["run"] is None and listed["owned_by"] == "free"


def _units(api: ApiGateway) -> list[dict[str, Any]]:
    answer = api.call("GET", "/api/v1/units", "viewer")
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()
    return listed


def _unit_waits(api: ApiGateway) -> dict[str, str]:
    """The attention list's ``units`` rows: run -> detail."""
    answer = api.call("GET", "/api/v1/attention", "viewer")
    assert answer.status_code == 200, answer.text
    return {row["run"]: row["detail"] for row in answer.json() if row["reason"] == "units"}


def _stop(api: ApiGateway, run_id: str) -> None:
    answer = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "STOP", "reason": "done"})
    assert answer.status_code == 202, answer.text
    wait_until(lambda: api.run(run_id)["status"] == "SUCCESS", 20, message=lambda: f"{run_id} stopped")


def test_units_a_run_holds_and_waits_for_on_every_surface(
        surfaces: tuple[ApiGateway, RunsServer], visit: Callable[..., Page]) -> None:
    api, opcua = surfaces
    env = api.env
    (holder,) = env.start_runs("surfaces.hold", [{"names": ["R1"]}])
    wait_until(lambda: _units(api)[0]["holder"] == holder, 20, message=lambda: f"R1 held: {_units(api)}")
    (waiter,) = env.start_runs("surfaces.hold", [{"names": ["R1", "TK2"]}])
    wait_until(lambda: _units(api)[1]["waiting"] == [waiter], 20, message=lambda: f"a run waiting: {_units(api)}")

    listed = _units(api)
    assert listed == env.cli("units", "--json").check().json()  # the same JSON as exchange units --json
    r1, tk2 = listed
    assert r1 == {"unit": "R1", "class": "reactor", "holder": holder, "since": r1["since"], "waiting": [waiter],
                  "held": []}
    assert r1["since"] and tk2 == {"unit": "TK2", "class": "tank", "holder": None, "since": None,
                                   "waiting": [waiter], "held": []}
    assert api.call("GET", "/api/v1/units").status_code == 401  # rights: read, signed in
    assert api.run(holder)["units"] == {"held": ["R1"], "waiting_for": []}
    assert env.show(waiter)["units"] == {"held": [], "waiting_for": ["R1", "TK2"]}
    assert "\nunits     holds R1\n" in env.cli("show", holder).check().stdout
    assert "\nunits     waits for R1, TK2\n" in env.cli("show", waiter).check().stdout

    wait_until(lambda: waiter in _unit_waits(api), 20, message="the wait on the attention list ([units] 1 s)")
    detail = _unit_waits(api)[waiter]
    assert detail.startswith("waits for R1, TK2 for ") and detail.endswith(f": R1 held by run {holder}; TK2 free")
    assert holder not in _unit_waits(api)
    assert f"units     {waiter[:8]}" in env.cli("runs", "--attention").check().stdout

    with opcua.client() as client:  # anonymous: read only
        wait_until(lambda: _read_or_none(client, "Units/R1/Holder") == holder, 20,
                   message=lambda: f"R1's Holder: {_read_or_none(client, 'Units/R1/Holder')!r}")
        assert _read_or_none(client, "Units/TK2/Holder") == ""

        page = visit("viewer")
        expect(page.locator("#attention tr[data-reason='units']")).to_contain_text("waits for units")
        page.get_by_role("link", name="Units", exact=True).click()
        expect(page.locator("h1")).to_have_text("Units")
        rows = page.locator("table.units tbody tr")
        expect(rows).to_have_count(2)
        r1_row = page.locator("table.units tr[data-unit='R1']")
        expect(r1_row.locator("td").nth(1)).to_have_text("reactor")
        expect(r1_row.locator("td.holder a")).to_have_attribute("href", f"/runs/{holder}")
        expect(r1_row.locator("td.holder a")).to_have_text(holder[:8])
        expect(r1_row.locator("td.waiting a")).to_have_attribute("href", f"/runs/{waiter}")
        expect(page.locator("table.units tr[data-unit='TK2'] td.holder")).to_have_text("free")
        screenshot(page, "units")

        _stop(api, holder)  # R1 released: the waiting run takes R1 and TK2
        wait_until(lambda: _read_or_none(client, "Units/R1/Holder") == waiter, 20, message="R1 to the waiter")
        wait_until(lambda: _read_or_none(client, "Units/TK2/Holder") == waiter, 20, message="TK2 to the waiter")
        page.reload()
        expect(r1_row.locator("td.holder a")).to_have_text(waiter[:8])
        expect(r1_row.locator("td.waiting a")).to_have_count(0)
        assert _unit_waits(api) == {}
        assert api.run(waiter)["units"] == {"held": ["R1", "TK2"], "waiting_for": []}

        _stop(api, waiter)
        wait_until(lambda: _read_or_none(client, "Units/R1/Holder") == "", 20, message="R1 free")
        assert _read_or_none(client, "Units/TK2/Holder") == ""
    assert [unit["holder"] for unit in _units(api)] == [None, None]


def test_a_plc_that_is_down_gives_the_state_unknown_with_the_reason(
        surfaces: tuple[ApiGateway, RunsServer], plant: SimulatedPlant) -> None:
    api, _ = surfaces
    plant.stop()  # the last test of the module: the plant is gone for good
    (listed,) = _phases(api)
    assert listed["state"] is None and listed["state_number"] is None, listed
    assert listed["state_quality"].startswith(("Bad", "Error")), listed
    assert listed["run"] is None
