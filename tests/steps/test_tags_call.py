"""tags.call and OPC UA arrays as durable steps in real runs (SQLite store, dispatcher, asyncua server).

A method call is a step with its own record: its outputs are the step's output, an audit event says
what was called with what, a retried run replays the recorded call instead of calling again, and a
refused call fails the run with the server's status code in the error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags
from tests.drivers.opcua_methods_server import INITIAL_ARRAYS, MethodsServer
from tests.steps.conftest import StepEngine

TAGS = {
    "[line]Recipe": {"device": "line", "address": "ns=2;s=Line1.Recipe"},
    "[line]Profile": {"device": "line", "address": "ns=2;s=Line1.Profile", "type": "Float32[]"},
}
FAIL_AFTER_CALL: list[bool] = []


@pytest.fixture(scope="module")
def server() -> Iterator[MethodsServer]:
    made = MethodsServer().start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], server: MethodsServer) -> StepEngine:
    server.set_value("Line1.Profile", INITIAL_ARRAYS["Line1.Profile"][1])
    server.busy = False
    server.calls.made.clear()
    return make_engine(devices={"line": {"driver": "opcua", "url": server.url, "comm_timeout_s": 2}}, tags=TAGS)


@workflow(name="tagcall.load")
def load(recipe: str, quantity: int) -> dict[str, Any]:
    profile = tags.write_confirm("[line]Profile", [10, 20.5, 30], timeout_ms=5000)
    called = tags.call("[line]Recipe", "Load", recipe, quantity, profile["value"])
    if FAIL_AFTER_CALL:
        FAIL_AFTER_CALL.clear()
        raise RuntimeError("the workflow fails after its call (once)")
    return {"profile": profile, "called": called, "read": tags.read("[line]Profile")}


def test_a_method_call_is_a_recorded_step_and_arrays_are_confirmed_whole(
    engine: StepEngine, server: MethodsServer
) -> None:
    view = engine.run("tagcall.load", {"recipe": "RCP-7", "quantity": 3})
    assert view["status"] == "SUCCESS", view["error"]
    result = view["result"]
    assert result["profile"]["confirmed"] is True and result["profile"]["value"] == [10.0, 20.5, 30.0]
    assert result["read"]["value"] == [10.0, 20.5, 30.0]
    assert result["called"] == {"path": "[line]Recipe", "method": "Load", "outputs": [True, server.batches]}
    assert [s["name"] for s in view["steps"]] == ["tags.write_confirm", "tags.call", "tags.read"]
    assert view["steps"][1]["output"] == result["called"]
    [event] = [e for e in view["events"] if e["kind"] == "method_call"]
    payload = event["payload"]
    assert (payload["tag"], payload["address"], payload["method"]) == ("[line]Recipe", "ns=2;s=Line1.Recipe", "Load")
    assert payload["arguments"] == ["RCP-7", 3, [10.0, 20.5, 30.0]]
    assert payload["outputs"] == [True, server.batches] and payload["step"] == "tags.call"
    assert server.calls.made == [("Load", [("RCP-7", "String"), (3, "Int32"), ([10.0, 20.5, 30.0], "Double")])]


def test_a_retried_run_replays_the_recorded_call_and_never_calls_again(
    engine: StepEngine, server: MethodsServer
) -> None:
    FAIL_AFTER_CALL.append(True)
    view = engine.run("tagcall.load", {"recipe": "RCP-8", "quantity": 2})
    assert view["status"] == "ERROR" and "fails after its call" in view["error"]["message"]
    assert len(server.calls.made) == 1
    engine.runtime.retry(view["id"])
    retried = engine.runtime.wait_for(view["id"], 30)
    assert retried["status"] == "SUCCESS", retried["error"]
    assert len(server.calls.made) == 1  # the call's recorded outcome was returned, not made again
    assert retried["result"]["called"]["outputs"] == [True, server.batches]


def test_a_refused_call_fails_the_run_with_the_status_code(engine: StepEngine, server: MethodsServer) -> None:
    server.busy = True
    view = engine.run("tagcall.load", {"recipe": "RCP-9", "quantity": 2})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "RefusedCall"  # a DeviceError
    assert "BadInvalidState (0x80AF0000)" in view["error"]["message"]
    [failed] = [e for e in view["events"] if e["kind"] == "method_call_failed"]
    assert "BadInvalidState" in failed["payload"]["error"]
    assert server.calls.made == []
