"""A run held on a step's failure (``on_step_error="hold"``) survives kill -9 of its gateway: the
restarted gateway waits for the operator again without executing the step, and RESUME or STOP then
work. A tag write whose answer was lost holds the run with the write in doubt; RESUME runs the step
"resumed in doubt", so the tag's ``on_doubt`` decides, and the real Modbus server in this process
counts one write however often the step is resumed. Gateways are real processes on SQLite and
PostgreSQL; commands go through ``exchange send``, views through ``exchange show --json``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.cli.test_cli_runs import Follower
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, count_lines, wait_until
from tests.netfaults import AnswerDropper
from tests.waiting import holds_for

APP = """
from pathlib import Path
from exchange.workflows.bootstrap import step, workflow
from testapps.sidefx import append_line

@step(name="mes.post")
def post(folder):
    append_line(Path(folder) / "posts", "post")
    if not (Path(folder) / "mes_up").exists():
        raise ConnectionRefusedError("MES at 10.0.0.9:443 refused the connection")
    return "posted"

@workflow(name="held.mes", on_step_error="hold")
def mes(folder):
    return post(folder)
"""

TAG_APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags

@workflow(name="held.write", on_step_error="hold")
def write(path, value):
    tags.write(path, value)
    return "written"
"""
MODBUS_WRITE_FUNCTIONS = (5, 6, 15, 16)


def _wait_held(env: ExchangeEnv, run_id: str, held_events: int = 1) -> dict[str, Any]:
    def held() -> dict[str, Any] | None:
        view = env.show(run_id)
        count = sum(1 for e in view["events"] if e["kind"] == "step_held")
        return view if view["state"] == "HELD" and view["held_on"] and count == held_events else None

    return wait_until(held, 30, interval_s=0.1, message=f"run {run_id} held ({held_events})")


def test_a_held_run_is_not_executed_again_after_kill9_until_resumed(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path / "env", store_url=store_url, zygote=exchange_zygote)
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("mes", APP)
    folder = tmp_path / "work"
    folder.mkdir()
    posts = folder / "posts"
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("held.mes", [{"folder": str(folder)}])
        view = _wait_held(env, run_id)
        assert view["status"] == "RUNNING" and count_lines(posts) == 1
        assert view["held_on"]["error"] == {
            "type": "ConnectionRefusedError", "message": "MES at 10.0.0.9:443 refused the connection"}
        gateway.kill9()
        gateway.restart()
        wait_until(lambda: (v := env.show(run_id))["executions"] == 2 and v["owner_alive"], 30, interval_s=0.1,
                   message="the restarted gateway to take the run back")
        assert holds_for(lambda: count_lines(posts) == 1, 1.0), "the held step ran again without a RESUME"
        shown = env.cli("show", run_id).check().stdout
        assert f"HELD ON   step 1 mes.post since {view['held_on']['since']}: ConnectionRefusedError" in shown
        follower = Follower(env, "follow", run_id)
        try:
            follower.wait_for(f"[{run_id[:8]}] held on step 1 mes.post: ConnectionRefusedError: MES at 10.0.0.9:443 "
                              f"refused the connection (RESUME runs it again, STOP raises the error)")
            (folder / "mes_up").touch()
            env.cli("send", run_id, "RESUME", "--reason", "MES is back").check()
            code, out = follower.finish(30)
        finally:
            follower.kill()
        view = env.show(run_id)
    assert code == 0 and json.loads(out.strip().splitlines()[-1]) == "posted", follower.stderr
    # the held step is printed once it has its outcome, not as HELD
    assert [line.split("] ", 1)[1].split()[:4] for line in follower.stderr.splitlines() if "mes.post  " in line] == [
        ["step", "1", "mes.post", "SUCCESS"]], follower.stderr
    assert view["status"] == "SUCCESS" and view["result"] == "posted" and count_lines(posts) == 2
    assert view["held_on"] is None and view["steps"][0]["attempts"] == 1


@pytest.fixture
def modbus_server() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False), SimPoint("HR1", DataType.INT16, 0)])
    server.start()
    yield server
    server.stop()


def _tag_env(tmp_path: Path, store_url: str, zygote: ForkServer, proxy: AnswerDropper) -> ExchangeEnv:
    env = ExchangeEnv.create(tmp_path / "env", store_url=store_url, zygote=zygote)
    env.write_app("write", TAG_APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(
            f'\n[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {proxy.port}\n'
            'timeout_ms = 1000\ncomm_timeout_s = 1\n\n'
            '[tags."[plant]Valve/Cmd"]\ndevice = "plc"\naddress = "C1"\n\n'
            '[tags."[plant]Speed/Setpoint"]\ndevice = "plc"\naddress = "HR1"\n'
        )
    return env


def _doubts(view: dict[str, Any]) -> list[str]:
    return [e["payload"]["resolution"] for e in view["events"] if e["kind"] == "tag_write_in_doubt"]


def test_a_setpoint_write_in_doubt_holds_and_resume_reads_it_back(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer, modbus_server: ModbusSimServer
) -> None:
    """on_doubt "readback": the answer is lost and the device goes away, so the write cannot be read
    back in time: held in doubt. The gateway is killed and restarted while held; the device returns;
    RESUME reads the value back, finds it applied and does not send it again."""
    proxy = AnswerDropper(modbus_server.port)
    env = _tag_env(tmp_path, store_url, exchange_zygote, proxy)
    try:
        with env.gateway() as gateway:
            gateway.start()
            proxy.arm(lambda data: len(data) > 7 and data[7] in MODBUS_WRITE_FUNCTIONS, forward=True, hold=True)
            (run_id,) = env.start_runs("held.write", [{"path": "[plant]Speed/Setpoint", "value": 1500}])
            assert proxy.fired.wait(30), "the write never reached the device"
            modbus_server.stop()  # the answer is lost with the device, which stays away past comm_timeout_s
            view = _wait_held(env, run_id)
            assert view["held_on"]["in_doubt"] is True
            assert view["held_on"]["error"]["type"] == "exchange.errors.WriteInDoubt"
            assert view["steps"][0]["status"] == "HELD_IN_DOUBT"
            assert modbus_server.write_count("HR1") == 1
            gateway.kill9()
            gateway.restart()
            wait_until(lambda: (v := env.show(run_id))["executions"] == 2 and v["owner_alive"], 30, interval_s=0.1,
                       message="the restarted gateway to take the run back")
            modbus_server.start()  # the device is back, same port, holding the value
            assert holds_for(lambda: env.show(run_id)["state"] == "HELD", 0.5)
            env.cli("send", run_id, "RESUME", "--reason", "PLC back").check()
            view = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 30, interval_s=0.1,
                              message="SUCCESS after RESUME")
    finally:
        proxy.close()
    assert modbus_server.write_count("HR1") == 1, "a write in doubt was sent again"
    assert modbus_server.get("HR1") == 1500
    assert _doubts(view) == ["the value could not be read back in time; not sent again",
                             "readback: the device holds the value; not sent again"]
    assert [e["payload"]["confirmed_by"] for e in view["events"] if e["kind"] == "tag_write"] == ["readback"]


def test_a_command_bit_write_in_doubt_is_never_sent_again_on_resume(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer, modbus_server: ModbusSimServer
) -> None:
    """on_doubt "fail" (a Boolean command): RESUME runs the step resumed in doubt, which refuses to
    send it again and holds again; STOP raises WriteInDoubt into the workflow. One write at the device."""
    proxy = AnswerDropper(modbus_server.port)
    env = _tag_env(tmp_path, store_url, exchange_zygote, proxy)
    try:
        with env.gateway() as gateway:
            gateway.start()
            proxy.arm(lambda data: len(data) > 7 and data[7] in MODBUS_WRITE_FUNCTIONS, forward=True)
            (run_id,) = env.start_runs("held.write", [{"path": "[plant]Valve/Cmd", "value": True}])
            view = _wait_held(env, run_id)
            assert view["held_on"]["in_doubt"] is True and modbus_server.write_count("C1") == 1
            env.cli("send", run_id, "RESUME", "--reason", "try again").check()
            view = _wait_held(env, run_id, held_events=2)
            assert view["held_on"]["error"]["type"] == "exchange.errors.WriteInDoubt"
            assert "stopped while sending this write" in view["held_on"]["error"]["message"]
            env.cli("send", run_id, "STOP", "--reason", "valve checked by hand").check()
            view = wait_until(lambda: (v := env.show(run_id))["status"] == "ERROR" and v, 30, interval_s=0.1,
                              message="ERROR after STOP")
    finally:
        proxy.close()
    assert modbus_server.write_count("C1") == 1, "a command bit in doubt was sent again"
    assert view["error"]["type"] == "WriteInDoubt"
    assert _doubts(view) == ['on_doubt = "fail": not sent again'] * 2
