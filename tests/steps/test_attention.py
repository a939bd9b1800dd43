"""Runs that need someone: an open prompt, a step held on its failure, a tag write in doubt (a real
Modbus server behind a proxy that loses the answer), an ERROR; each listed once per reason, most
urgent first, and gone once someone acted. The webhook: a real HTTP server on 127.0.0.1 gets one
POST per new row, retried after a refusal, never twice (not from a second gateway either)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._plant.attention_hook import AttentionWebhook
from exchange._values import DataType
from exchange.errors import FatalError
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.steps import operator, tags
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.integrations.http_server import Reply, ScriptedHttpServer
from tests.netfaults import AnswerDropper
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

MODBUS_WRITES = (5, 6, 15, 16)


@workflow(name="attn.approval")
def approval() -> Any:
    return operator.prompt("ok", "Release batch B-1?", fields={"ok": {"type": "bool"}})


@step(name="attn.pump")
def pump(flag: str) -> str:
    if not Path(flag).exists():
        raise FatalError("pump P-7 tripped")
    return "pumped"


@workflow(name="attn.held", on_step_error="hold")
def held(flag: str) -> str:
    return pump(flag)


@workflow(name="attn.fails")
def fails() -> None:
    raise FatalError("the MES refused the batch")


@workflow(name="attn.valve")
def valve() -> Any:
    return tags.write("[plant]Valve/Cmd", True)


@workflow(name="attn.fine")
def fine() -> str:
    return "fine"


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def proxy(plc: ModbusSimServer) -> Iterator[AnswerDropper]:
    dropper = AnswerDropper(plc.port)
    yield dropper
    dropper.close()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], proxy: AnswerDropper, http_server: ScriptedHttpServer) -> StepEngine:
    return make_engine(devices={"plc": modbus_settings(proxy.port)},
                       tags={"[plant]Valve/Cmd": {"device": "plc", "address": "C1"}},
                       attention={"webhook_url": http_server.url("/hook"), "webhook_timeout_s": 5})


def reasons(engine: StepEngine) -> list[tuple[str, str]]:
    return [(row["reason"], row["workflow"]) for row in engine.runtime.attention()]


def test_every_reason_is_listed_most_urgent_first_and_goes_once_someone_acted(
    engine: StepEngine, proxy: AnswerDropper, plc: ModbusSimServer, tmp_path: Path,
) -> None:
    runtime = engine.runtime
    assert engine.run("attn.fine")["status"] == "SUCCESS"
    failed = engine.run("attn.fails")
    proxy.arm(lambda data: len(data) >= 8 and data[7] in MODBUS_WRITES, forward=True)
    doubt = engine.run("attn.valve")
    assert doubt["error"]["type"] == "WriteInDoubt" and plc.write_count("C1") == 1
    prompt = runtime.start("attn.approval", {})
    flag = tmp_path / "pump-fixed"
    hold = runtime.start("attn.held", {"flag": str(flag)})
    wait_until(lambda: len(reasons(engine)) == 5, 20, message=lambda: f"five rows, got {reasons(engine)}")
    assert reasons(engine) == [("prompt", "attn.approval"), ("held", "attn.held"), ("in_doubt", "attn.valve"),
                               ("error", "attn.valve"), ("error", "attn.fails")]
    rows = {row["reason"] + ":" + row["run"]: row for row in runtime.attention()}
    assert rows[f"prompt:{prompt}"]["detail"] == "prompt 'ok' waits for an answer: Release batch B-1?"
    assert rows[f"held:{hold}"]["detail"] == "held on step 1 attn.pump: FatalError: pump P-7 tripped"
    assert rows[f"error:{failed['id']}"]["detail"] == "FatalError: the MES refused the batch"
    assert "[plant]Valve/Cmd is in doubt" in rows[f"in_doubt:{doubt['id']}"]["detail"]

    runtime.answer_prompt(prompt, "ok", {"ok": True}, actor="anna")
    flag.touch()
    runtime.send_command(hold, "RESUME")
    assert runtime.wait_for(prompt, 20)["status"] == runtime.wait_for(hold, 20)["status"] == "SUCCESS"
    assert reasons(engine) == [("in_doubt", "attn.valve"), ("error", "attn.valve"), ("error", "attn.fails")]


def test_the_webhook_tells_each_new_row_once_retrying_a_refusal(
    engine: StepEngine, http_server: ScriptedHttpServer, make_engine: Callable[..., StepEngine],
) -> None:
    http_server.script("/hook", Reply(503), Reply(200, {"ok": True}))
    failed = engine.run("attn.fails")
    hook = AttentionWebhook(engine.runtime, "gateway-a")
    assert hook.look() == 0  # refused (503): to be tried again after a second
    wait_until(lambda: hook.look() == 1, 10, interval_s=0.2, message="the retried POST")
    posts = http_server.received("/hook")
    assert len(posts) == 2
    body = json.loads(posts[-1].body)
    assert body["event"] == "attention" and body["run"] == failed["id"] and body["reason"] == "error"
    assert body["detail"] == "FatalError: the MES refused the batch" and body["gateway"] == "steps-test"
    assert hook.look() == 0  # told already
    other = AttentionWebhook(engine.runtime, "gateway-b")  # another gateway (or a restart): reads what was told
    wait_until(lambda: other.look() == 0 and len(http_server.received("/hook")) == 2, 5, message="no second POST")
    told = [e for e in engine.runtime.get_run(failed["id"])["events"] if e["kind"] == "attention_notified"]
    assert [(e["payload"]["reason"], e["actor"]) for e in told] == [("error", "gateway-a")]

    second = engine.run("attn.fails")
    hook.start()  # the gateway's thread
    try:
        wait_until(lambda: len(http_server.received("/hook")) == 3, 10, message="the thread's POST")
    finally:
        hook.stop()
    assert json.loads(http_server.received("/hook")[-1].body)["run"] == second["id"]


def test_the_webhook_does_not_follow_a_redirect(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    """The configured URL is the receiver: a 307 pointing elsewhere is a failed POST (tried again
    later), and nothing is sent where it points."""
    http_server.script("/hook", Reply(307, headers={"Location": http_server.url("/elsewhere")}))
    http_server.script("/elsewhere", Reply(200, {"ok": True}))
    failed = engine.run("attn.fails")
    hook = AttentionWebhook(engine.runtime, "gateway-a")
    assert hook.look() == 0
    assert len(http_server.received("/hook")) == 1
    assert http_server.received("/elsewhere") == []
    assert not [e for e in engine.runtime.get_run(failed["id"])["events"] if e["kind"] == "attention_notified"]
