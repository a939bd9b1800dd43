"""http.request as a durable step inside real runs, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from exchange.errors import HttpArgumentError
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import http
from tests.conftest import free_port
from tests.integrations.http_server import Received, Reply, ScriptedHttpServer
from tests.steps.conftest import StepEngine
from tests.waiting import holds_for, wait_until

_NAMESPACE = uuid.UUID("6f1c2a57-3d0e-4b8e-9a43-2f7d5c1e8b90")  # the step module's key namespace


@workflow(name="httpsteps.call")
def call(method: str, url: str, body: Any = None, timeout_ms: int = 10000) -> dict[str, Any]:
    return http.request(method, url, json_body=body, timeout_ms=timeout_ms)


@workflow(name="httpsteps.call_with")
def call_with(method: str, url: str, options: dict[str, Any]) -> dict[str, Any]:
    """One request with this call's own step options (retry schedule, on_error)."""
    return http.request(method, url, **options)


@workflow(name="httpsteps.two_posts")
def two_posts(url: str) -> list[int]:
    return [http.request("POST", url, json_body={"n": n})["status"] for n in (1, 2)]


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine(http={"default_timeout_ms": 5000})


def waits(received: list[Received]) -> list[float]:
    """The client's wait before each retry as the server measures it: from the moment it began to
    answer one request to the arrival of the next (its own monotonic stamps: never shorter than the
    client's wait between reading the answer and sending again)."""
    gaps = []
    for answered, retried in zip(received, received[1:]):
        assert answered.replied_at is not None
        gaps.append(retried.arrived_at - answered.replied_at)
    return gaps


def test_get_json_is_the_recorded_output(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    http_server.script("/recipe/7", Reply(200, {"id": 7, "setpoint": 71.5}))
    view = engine.run("httpsteps.call", {"method": "GET", "url": http_server.url("/recipe/7")})
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["json"] == {"id": 7, "setpoint": 71.5}
    (step,) = view["steps"]
    assert (step["name"], step["attempts"]) == ("http.request", 1)
    assert step["output"]["status"] == 200 and step["output"]["json"] == {"id": 7, "setpoint": 71.5}


def test_503_twice_then_200_is_retried_with_the_default_backoff_and_one_key(
    engine: StepEngine, http_server: ScriptedHttpServer
) -> None:
    http_server.script("/orders", Reply(503, "down"), Reply(503, "still down"), Reply(201, {"order": 1}))
    view = engine.run("httpsteps.call", {"method": "POST", "url": http_server.url("/orders"), "body": {"qty": 3}})
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["status"] == 201 and view["steps"][0]["attempts"] == 3
    received = http_server.received("/orders")
    assert len(received) == 3
    keys = {r.header("Idempotency-Key") for r in received}
    assert keys == {str(uuid.uuid5(_NAMESPACE, f"{view['id']}:1"))}  # one key, derived from run and step
    # defaults: 1 s, then 2 s (interval 1 s, backoff 2); never sooner
    gaps = waits(received)
    assert 1.0 <= gaps[0] < 1.9 and 2.0 <= gaps[1] < 3.5, gaps


def test_each_step_of_a_run_has_its_own_key(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    http_server.script("/post", Reply(200, {}))
    view = engine.run("httpsteps.two_posts", {"url": http_server.url("/post")})
    assert view["status"] == "SUCCESS", view["error"]
    keys = [r.header("Idempotency-Key") for r in http_server.received("/post")]
    assert keys == [str(uuid.uuid5(_NAMESPACE, f"{view['id']}:{seq}")) for seq in (1, 2)]


def test_400_is_not_retried(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    http_server.script("/orders", Reply(400, {"error": "qty must be positive"}))
    view = engine.run("httpsteps.call", {"method": "POST", "url": http_server.url("/orders"), "body": {"qty": -1}})
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("HttpStatusError")
    assert "HTTP 400" in view["error"]["message"] and "qty must be positive" in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1 and len(http_server.received("/orders")) == 1


@pytest.mark.parametrize(("retry_after_s", "interval_s"), [(0, 5.0), (2, 0.2)], ids=["0", "2"])
def test_429_retry_after_replaces_the_backoff(
    engine: StepEngine, http_server: ScriptedHttpServer, retry_after_s: int, interval_s: float
) -> None:
    """The server's word wins over the backoff both ways: Retry-After 0 retries at once where the
    backoff would wait 5 s, Retry-After 2 waits 2 s where it would wait 0.2 s. Never sooner than
    Retry-After, as the server measures it: from when it answered to when the retry arrived (taken
    by the server itself; a stamp taken by a thread watching the server's log is late by however
    long that thread waits for the CPU, which made this test fail under load when it was)."""
    http_server.script(
        "/limited", Reply(429, "slow down", {"Retry-After": str(retry_after_s)}), Reply(200, {"ok": 1})
    )
    options = {"interval_seconds": interval_s}
    view = engine.run("httpsteps.call_with", {"method": "GET", "url": http_server.url("/limited"), "options": options})
    assert view["status"] == "SUCCESS", view["error"]
    assert view["steps"][0]["attempts"] == 2
    (gap,) = waits(http_server.received("/limited"))
    assert retry_after_s <= gap < retry_after_s + 2.0, gap


def test_timeout_is_retried_with_the_same_key(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    release = threading.Event()
    http_server.script("/slow", Reply(200, {"late": True}, hold=release), Reply(200, {"late": False}))
    try:
        view = engine.run("httpsteps.call", {"method": "POST", "url": http_server.url("/slow"), "timeout_ms": 300})
    finally:
        release.set()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["json"] == {"late": False} and view["steps"][0]["attempts"] == 2
    keys = [r.header("Idempotency-Key") for r in http_server.received("/slow")]
    assert len(keys) == 2 and keys[0] == keys[1]


def test_outside_a_run_each_call_gets_a_random_key(engine: StepEngine, http_server: ScriptedHttpServer) -> None:
    http_server.script("/direct", Reply(200, {"ok": True}))
    assert http.request("POST", http_server.url("/direct"), json_body={})["json"] == {"ok": True}
    assert http.request("POST", http_server.url("/direct"), json_body={})["status"] == 200
    first, second = (r.header("Idempotency-Key") for r in http_server.received("/direct"))
    assert first and second and first != second


def test_connection_refused_is_retried_until_the_service_is_up(engine: StepEngine) -> None:
    port = free_port()
    run_id = engine.runtime.start("httpsteps.call", {"method": "POST", "url": f"http://127.0.0.1:{port}/late"})

    def waiting_for_retry() -> bool:
        steps = engine.runtime.get_run(run_id)["steps"]
        return bool(steps) and steps[0]["status"] == "RETRYING"

    wait_until(waiting_for_retry, 10, message="the refused first attempt")
    step = engine.runtime.get_run(run_id)["steps"][0]
    assert step["error"]["type"].endswith("CommunicationError") and "refused" in step["error"]["message"].lower()
    server = ScriptedHttpServer(port=port)
    try:
        server.script("/late", Reply(200, {"up": True}))
        view = engine.runtime.wait_for(run_id, 30)
    finally:
        server.close()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["json"] == {"up": True} and view["steps"][0]["attempts"] >= 2


def test_a_call_sets_its_own_retry_schedule_and_holds_on_failure(
    engine: StepEngine, http_server: ScriptedHttpServer
) -> None:
    """``max_attempts=2, interval_seconds=0.2, on_error="hold"`` in a workflow that raises: the MES is
    down, the call gives up after two attempts 0.2 s apart (not the default five over 15 s) and holds
    the run; RESUME runs it again with two fresh attempts; once the MES is back it succeeds."""
    http_server.script("/mes", Reply(503, "MES down"))
    options = {"max_attempts": 2, "interval_seconds": 0.2, "on_error": "hold"}
    rt = getWorkflows()
    run_id = rt.start("httpsteps.call_with", {"method": "POST", "url": http_server.url("/mes"), "options": options})
    view = wait_until(lambda: (v := rt.getRun(run_id))["held_on"] is not None and v, 10, message="the call held")
    assert view["held_on"]["step"] == "http.request" and view["held_on"]["attempts"] == 2
    assert view["held_on"]["error"]["type"].endswith("HttpRetryableStatus")
    assert holds_for(lambda: len(http_server.received("/mes")) == 2, 0.3)  # no third attempt
    (gap,) = waits(http_server.received("/mes"))
    assert 0.2 <= gap < 0.9, gap  # the default schedule would wait 1 s

    rt.sendCommand(run_id, "RESUME", "MES restarted")
    wait_until(lambda: len(http_server.received("/mes")) == 4 and rt.getRun(run_id)["state"] == "HELD", 10,
               message="two fresh attempts, then held again")
    http_server.script("/mes", Reply(201, {"batch": 7}))
    rt.sendCommand(run_id, "RESUME", "MES really restarted")
    view = rt.waitFor(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["json"] == {"batch": 7}
    keys = {r.header("Idempotency-Key") for r in http_server.received("/mes")}
    assert len(keys) == 1  # every attempt of the held and resumed call is one operation


def test_a_retry_after_longer_than_the_call_allows_gives_up_at_once(
    engine: StepEngine, http_server: ScriptedHttpServer
) -> None:
    """Retry-After 30 with ``retry_after_max_seconds=5``: no retry before the server's time, and no
    30 s wait either: the call fails now (or holds, with on_error="hold")."""
    http_server.script("/busy", Reply(429, "busy", {"Retry-After": "30"}), Reply(200, {"ok": 1}))
    options = {"retry_after_max_seconds": 5}
    view = engine.run("httpsteps.call_with", {"method": "GET", "url": http_server.url("/busy"), "options": options},
                      timeout_s=10)
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("HttpRetryableStatus") and "retry after 30 s" in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1 and len(http_server.received("/busy")) == 1


@pytest.mark.parametrize(("option", "value", "fragment"), [
    ("max_attempts", 0, "max_attempts must be an integer >= 1"),
    ("max_attempts", 2.0, "max_attempts must be an integer >= 1"),
    ("interval_seconds", -1, "interval_seconds must be a finite number >= 0, got -1"),
    ("interval_seconds", float("nan"), "interval_seconds must be a finite number >= 0, got nan"),
    ("backoff_rate", 0.5, "backoff_rate must be a finite number >= 1, got 0.5"),
    ("retries_allowed", "yes", "retries_allowed must be True or False, got 'yes'"),
    ("retry_after_max_seconds", "60", "retry_after_max_seconds must be a finite number >= 0, got '60'"),
    ("on_error", "Hold", "on_error must be one of 'raise', 'hold', got 'Hold'"),
], ids=["max_attempts=0", "max_attempts=2.0", "interval=-1", "interval=nan", "backoff_rate=0.5",
        "retries_allowed=yes", "retry_after_max=str", "on_error=Hold"])
def test_a_bad_step_option_is_refused_before_anything_is_sent(
    http_server: ScriptedHttpServer, option: str, value: Any, fragment: str
) -> None:
    """Outside a run (a plain call, no runtime needed: nothing gets as far as the HTTP client)."""
    http_server.script("/never", Reply(200, {}))
    with pytest.raises(HttpArgumentError) as refused:
        http.request("POST", http_server.url("/never"), **{option: value})
    assert str(refused.value).startswith("step http.request: ") and fragment in str(refused.value)
    assert http_server.received("/never") == []


def test_a_misspelt_option_is_refused_as_python_refuses_it_and_sends_nothing(http_server: ScriptedHttpServer) -> None:
    """The options are declared as ``**options``: a name that is none of them is not taken silently."""
    http_server.script("/never", Reply(200, {}))
    with pytest.raises(TypeError, match="request\\(\\) got an unexpected keyword argument 'max_attempt'"):
        http.request("POST", http_server.url("/never"), max_attempt=2)
    assert http_server.received("/never") == []


def test_a_bad_step_option_in_a_run_ends_it_before_the_step(
    engine: StepEngine, http_server: ScriptedHttpServer
) -> None:
    """Refused in the workflow, before a step is recorded: not held, not retried, nothing sent."""
    http_server.script("/never", Reply(200, {}))
    options = {"max_attempts": 0, "on_error": "hold"}
    view = engine.run("httpsteps.call_with", {"method": "POST", "url": http_server.url("/never"), "options": options})
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("HttpArgumentError")
    assert "max_attempts" in view["error"]["message"] and view["steps"] == [] and view["held_on"] is None
    assert http_server.received("/never") == []
