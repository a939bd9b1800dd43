"""Schedules, tag triggers and HMI command tags with real gateways: one run per tick across two
gateways on one PostgreSQL, one catch-up run for ticks missed while down, pause/resume/trigger
through the command; one run per coil edge at a real Modbus server (none invented at start-up, one
for an edge made while the gateway was down); a push-button coil HOLDs the partition's run, the
ack is written back and the audit names the tag. A gateway refuses to start, in one line naming the
key, on an ack_value that does not fit its tag or an ack tag its protocol cannot write, and on a cron
that never fires (which `schedules list` refuses too); a paused schedule is listed with no next tick."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import READY_MARK, ExchangeEnv, operator_loop_app, wait_until
from tests.waiting import holds_for

APP = operator_loop_app("pf.loop", prelude='''

@workflow(name="pf.tick")
def tick(scheduled_at=None):
    return scheduled_at


@workflow(name="pf.started")
def started(trigger_value=None, trigger_at=None, line=0):
    return {"value": trigger_value, "at": trigger_at, "line": line}
''')


def _env(root: Path, zygote: ForkServer, config: str, store_url: str | None = None,
         node: str | None = None) -> ExchangeEnv:
    env = ExchangeEnv.create(root, store_url=store_url, zygote=zygote, engine={"node_id": node} if node else None)
    env.write_app("pf_app", APP)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write("\n" + config)
    return env


def _ticks(env: ExchangeEnv) -> list[float]:
    runs = env.runtime().list_runs(workflow="pf.tick", limit=1000)
    return sorted(datetime.fromisoformat(r["params"]["scheduled_at"]).timestamp() for r in runs)


def test_two_gateways_on_one_postgresql_start_one_run_per_tick(tmp_path: Path, pg_url: str,
                                                               exchange_zygote: ForkServer) -> None:
    config = '[schedules.every_second]\nworkflow = "pf.tick"\ncron = "* * * * * *"\n'
    first = _env(tmp_path / "a", exchange_zygote, config, pg_url, "node-a")
    second = _env(tmp_path / "b", exchange_zygote, config, pg_url, "node-b")
    with first.gateway() as gateway_a, second.gateway() as gateway_b:
        gateway_a.start()
        gateway_b.start()
        wait_until(lambda: len(_ticks(first)) >= 5, 30, message="five ticks")
        gateway_a.stop()
        gateway_b.stop()
    ticks = _ticks(first)
    assert len(ticks) == len(set(ticks))  # one run per tick
    assert ticks == [ticks[0] + i for i in range(len(ticks))]  # every second, none missed
    runs = first.runtime().list_runs(workflow="pf.tick", limit=1000)
    assert {r["created_by"] for r in runs} == {"schedule:every_second"}


def test_missed_ticks_give_one_catch_up_run_and_the_command_pauses_and_triggers(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    config = '[schedules.two_s]\nworkflow = "pf.tick"\ncron = "*/2 * * * * *"\ntimezone = "Europe/Berlin"\n'
    env = _env(tmp_path / "plant", exchange_zygote, config)
    with env.gateway() as gateway:
        gateway.start()
        wait_until(lambda: len(_ticks(env)) >= 1, 20, message="a first tick")
        gateway.stop()
        stopped_at = time.time()
        before = len(_ticks(env))
        time.sleep(5.0)  # the gateway is down for two or three ticks
        gateway.start()
        # The restarted gateway's first look finds the ticks missed meanwhile and starts one run, for
        # the newest: on a loaded machine that look can come a tick after the start was asked for.
        found = wait_until(lambda: re.search(r"schedule two_s: tick (\S+) -> run \S+ \((\d+) tick\(s\) due",
                                             gateway.log_text()), 20, message="the catch-up run")
        catch_up = datetime.fromisoformat(found.group(1)).timestamp()
        assert int(found.group(2)) >= 2, found.group(0)  # the ticks missed while down: two or three
        wait_until(lambda: any(t > catch_up for t in _ticks(env)), 20, message="a tick after the catch-up")
        missed = [t for t in _ticks(env) if stopped_at < t <= catch_up]
        assert missed == [catch_up] and len(_ticks(env)) >= before + 2, missed  # one catch-up run, not a burst

        listed = env.cli("schedules", "list", "--json").check().json()
        assert [(s["name"], s["paused"], s["timezone"]) for s in listed] == [("two_s", False, "Europe/Berlin")]
        env.cli("schedules", "pause", "two_s").check()
        count = len(_ticks(env))
        assert holds_for(lambda: len(_ticks(env)) <= count + 1, 4.5)  # at most the tick already under way
        paused = env.cli("schedules", "list", "--json").check().json()
        assert paused[0]["paused"] is True
        manual = env.cli("schedules", "trigger", "two_s").check().stdout.strip()
        wait_until(lambda: env.show(manual)["status"] == "SUCCESS", 20, message="the triggered run")
        env.cli("schedules", "resume", "two_s").check()
        resumed = len(_ticks(env))
        wait_until(lambda: len(_ticks(env)) > resumed, 20, message="ticks after resume")
        unknown = env.cli("schedules", "pause", "nope")
        assert unknown.returncode == 1 and "two_s" in unknown.stderr


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False), SimPoint("C2", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


def _plc_config(port: int) -> str:
    return f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
unit_id = 1
timeout_ms = 1000

[tags."[t]StartPB"]
device = "plc"
address = "C1"

[tags."[t]HoldPB"]
device = "plc"
address = "C2"

[triggers.start]
tag = "[t]StartPB"
when = "rising"
workflow = "pf.started"
params = {{ line = 1 }}
poll_ms = 50

[command_tags.hold]
tag = "[t]HoldPB"
cmd = "HOLD"
partition_key = "line1"
ack_tag = "[t]HoldPB"
poll_ms = 50
"""


def _started(env: ExchangeEnv) -> list[dict[str, Any]]:
    return env.runtime().list_runs(workflow="pf.started", limit=100)


def _state(env: ExchangeEnv, kind: str, name: str) -> Any:
    return env.runtime().store.plant.get(kind, name)


def test_one_run_per_coil_edge_none_invented_one_for_an_edge_made_while_down(
        tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    plc.set("C1", True)  # already high before any gateway saw it
    env = _env(tmp_path / "plant", exchange_zygote, _plc_config(plc.port))
    with env.gateway() as gateway:
        gateway.start()
        wait_until(lambda: _state(env, "trigger", "start") is not None, 20, message="the trigger's first reading")
        assert holds_for(lambda: _started(env) == [], 0.5)  # a high coil with no history is no edge
        for edges in (1, 2):
            plc.set("C1", False)
            wait_until(lambda: _state(env, "trigger", "start").last_value is False, 20, message="low seen")
            plc.set("C1", True)
            wait_until(lambda edges=edges: len(_started(env)) == edges, 20, message=f"run {edges}")
        runs = _started(env)
        assert {r["result"]["value"] for r in runs if r["result"]} <= {True}
        assert all(r["created_by"] == "trigger:start" and r["params"]["line"] == 1 for r in runs)
        plc.set("C1", False)
        wait_until(lambda: _state(env, "trigger", "start").last_value is False, 20, message="low seen")
        gateway.stop()
        plc.set("C1", True)  # the edge happens while no gateway runs
        gateway.start()
        wait_until(lambda: len(_started(env)) == 3, 20, message="one run for the edge made while down")
        assert holds_for(lambda: len(_started(env)) == 3, 0.5)


def test_a_push_button_coil_holds_the_partitions_run_and_is_acknowledged(
        tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, _plc_config(plc.port))
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("pf.loop", [{}], partitionKey="line1")
        wait_until(lambda: env.show(run_id)["state"] in (None, "RUNNING") and env.show(run_id)["status"] == "RUNNING",
                   20, message="RUNNING")
        wait_until(lambda: _state(env, "command_tag", "hold") is not None, 20, message="the button's first reading")
        plc.set("C2", True)  # the operator presses HOLD on the HMI
        wait_until(lambda: env.show(run_id)["state"] == "HELD", 20, message="HELD by the push button")
        wait_until(lambda: plc.get("C2") is False, 20, message="the button's bit written back")
        sent = [(e["payload"]["cmd"], e["actor"]) for e in env.show(run_id)["events"] if e["kind"] == "command_sent"]
        assert sent == [("HOLD", "tag:[t]HoldPB")]
        env.cli("send", run_id, "STOP").check()


def test_an_opc_ua_trigger_is_judged_through_the_subscription(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    from simulators.servers.opcua import OpcUaSimServer

    with OpcUaSimServer([SimPoint("ns=2;s=Line1.Start", DataType.BOOLEAN, False)]) as server:
        config = f"""
[devices.ua]
driver = "opcua"
url = "{server.url}"

[tags."[ua]Start"]
device = "ua"
address = "ns=2;s=Line1.Start"

[triggers.ua_start]
tag = "[ua]Start"
workflow = "pf.started"
poll_ms = 60000
"""
        env = _env(tmp_path / "plant", exchange_zygote, config)  # a poll a minute: only the subscription is quick
        with env.gateway() as gateway:
            gateway.start()
            wait_until(lambda: _state(env, "trigger", "ua_start") is not None, 20, message="the subscription's value")
            for edges in (1, 2):
                server.set("ns=2;s=Line1.Start", True)
                wait_until(lambda edges=edges: len(_started(env)) == edges, 20, message=f"run {edges}")
                server.set("ns=2;s=Line1.Start", False)
                wait_until(lambda: _state(env, "trigger", "ua_start").last_value is False, 20, message="low seen")
            assert all(r["created_by"] == "trigger:ua_start" for r in _started(env))


def test_a_gateway_refuses_a_schedule_of_an_unknown_workflow(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, '[schedules.cip]\nworkflow = "pf.nope"\ncron = "0 6 * * *"\n')
    refused = env.cli("gateway", timeout_s=60)
    assert refused.returncode == 1
    assert "schedules.cip.workflow 'pf.nope' is not a workflow of the apps" in refused.stderr
    assert "pf.tick" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


@pytest.fixture
def panel() -> Iterator[ModbusSimServer]:
    """A PLC with a push-button coil, a setpoint register, an input register and a read-only register."""
    server = ModbusSimServer([SimPoint("C2", DataType.BOOLEAN, False), SimPoint("HR5", DataType.INT16, 0),
                              SimPoint("IR3", DataType.INT16, 0), SimPoint("HR7", DataType.INT16, 0)])
    server.start()
    yield server
    server.stop()


def _panel_config(port: int, ack_tag: str, ack_value: str) -> str:
    return f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
unit_id = 1

[tags."[t]HoldPB"]
device = "plc"
address = "C2"

[tags."[t]Setpoint"]
device = "plc"
address = "HR5"
max = 1500

[tags."[t]Level"]
device = "plc"
address = "IR3"

[tags."[t]Locked"]
device = "plc"
address = "HR7"
access = "ro"

[command_tags.line1_hold]
tag = "[t]HoldPB"
cmd = "HOLD"
workflow = "pf.loop"
ack_tag = "{ack_tag}"
ack_value = {ack_value}
"""


def _refused_at_start(env: ExchangeEnv) -> str:
    """The gateway's one line of refusal: exit 1, before its API listens or anything runs."""
    refused = env.cli("gateway", "--api", "127.0.0.1:0", timeout_s=60)
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), refused.stderr
    assert "listening" not in refused.stderr and READY_MARK not in refused.stderr
    assert "Traceback" not in refused.stderr
    return lines[0]


@pytest.mark.parametrize(("ack_tag", "ack_value", "fragments"), [
    ("[t]HoldPB", "5", ["command_tags.line1_hold.ack_value: 5 does not fit tag '[t]HoldPB' (Boolean)",
                        "5 is not a boolean"]),
    ("[t]Setpoint", "2000", ["command_tags.line1_hold.ack_value: 2000 does not fit tag '[t]Setpoint' (Int16, max 1500)",
                             "2000 is above the tag's max 1500"]),
    ("[t]Setpoint", '"ten"', ["command_tags.line1_hold.ack_value: 'ten' does not fit tag '[t]Setpoint'",
                              "'ten' is not a number"]),
    ("[t]Setpoint", "true", ["command_tags.line1_hold.ack_value: True does not fit tag '[t]Setpoint'",
                             "is a boolean, not a number"]),
    ("[t]Level", "0", ["command_tags.line1_hold.ack_tag: tag '[t]Level'", "cannot be written over its protocol"]),
    ("[t]Locked", "0", ["command_tags.line1_hold.ack_tag '[t]Locked' is read-only"]),
], ids=["number-for-a-coil", "above-max", "text-for-a-number", "boolean-for-a-number", "input-register",
        "read-only"])
def test_a_gateway_refuses_an_ack_value_that_does_not_fit_its_tag(
        tmp_path: Path, exchange_zygote: ForkServer, panel: ModbusSimServer, ack_tag: str, ack_value: str,
        fragments: list[str]) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, _panel_config(panel.port, ack_tag, ack_value))
    line = _refused_at_start(env)
    for fragment in fragments:
        assert fragment in line
    assert panel.get("C2") is False and panel.get("HR5") == 0  # nothing was written


def test_an_ack_value_that_fits_starts_the_gateway(tmp_path: Path, exchange_zygote: ForkServer,
                                                   panel: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, _panel_config(panel.port, "[t]Setpoint", "1500"))
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("pf.loop", [{}])
        wait_until(lambda: env.show(run_id)["status"] == "RUNNING", 20, message="RUNNING")
        wait_until(lambda: _state(env, "command_tag", "line1_hold") is not None, 20, message="the first reading")
        panel.set("C2", True)
        wait_until(lambda: env.show(run_id)["state"] == "HELD", 20, message="HELD by the push button")
        wait_until(lambda: panel.get("HR5") == 1500, 20, message="the ack written")
        env.cli("send", run_id, "STOP").check()


def test_a_cron_that_never_fires_is_refused_at_start_and_by_schedules_list(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, '[schedules.cip]\nworkflow = "pf.tick"\ncron = "0 6 31 2 *"\n')
    assert "schedules.cip.cron '0 6 31 2 *' never fires" in _refused_at_start(env)
    listed = env.cli("schedules", "list")
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert "schedules.cip.cron '0 6 31 2 *' never fires" in listed.stderr
    assert len(listed.stderr.strip().splitlines()) == 1


def test_schedules_list_shows_no_next_tick_while_paused(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, '[schedules.cip]\nworkflow = "pf.tick"\ncron = "0 6 * * *"\n')
    env.cli("run", "pf.tick").check()  # creates the store
    active = env.cli("schedules", "list", "--json").check().json()
    assert active[0]["paused"] is False and active[0]["next_tick"].endswith("T06:00:00.000+00:00")
    env.cli("schedules", "pause", "cip").check()
    paused = env.cli("schedules", "list", "--json").check().json()
    assert (paused[0]["paused"], paused[0]["next_tick"]) == (True, None)
    text = env.cli("schedules", "list").check().stdout
    assert "PAUSED (no next tick)" in text and "next 20" not in text
    env.cli("schedules", "resume", "cip").check()
    text = env.cli("schedules", "list").check().stdout
    assert "next 20" in text and "PAUSED" not in text
