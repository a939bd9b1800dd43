"""http.request as a durable step inside real runs, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import http
from tests.conftest import free_port
from tests.integrations.http_server import Reply, ScriptedHttpServer
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

_NAMESPACE = uuid.UUID("6f1c2a57-3d0e-4b8e-9a43-2f7d5c1e8b90")  # the step module's key namespace


@workflow(name="httpsteps.call")
def call(method: str, url: str, body: Any = None, timeout_ms: int = 10000) -> dict[str, Any]:
    return http.request(method, url, json_body=body, timeout_ms=timeout_ms)


@workflow(name="httpsteps.two_posts")
def two_posts(url: str) -> list[int]:
    return [http.request("POST", url, json_body={"n": n})["status"] for n in (1, 2)]


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine(http={"default_timeout_ms": 5000})


class Stamps:
    """Arrival times of requests at the server, taken by polling its log (no sleeps)."""

    def __init__(self, server: ScriptedHttpServer, path: str) -> None:
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(server, path), daemon=True)
        self._thread.start()

    def _watch(self, server: ScriptedHttpServer, path: str) -> None:
        while not self._stop.wait(0.005):
            while len(server.received(path)) > len(self.times):
                self.times.append(time.monotonic())

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(5)
        return [b - a for a, b in zip(self.times, self.times[1:])]


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
    stamps = Stamps(http_server, "/orders")
    view = engine.run("httpsteps.call", {"method": "POST", "url": http_server.url("/orders"), "body": {"qty": 3}})
    gaps = stamps.stop()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["status"] == 201 and view["steps"][0]["attempts"] == 3
    received = http_server.received("/orders")
    assert len(received) == 3
    keys = {r.header("Idempotency-Key") for r in received}
    assert keys == {str(uuid.uuid5(_NAMESPACE, f"{view['id']}:1"))}  # one key, derived from run and step
    # defaults: 1 s, then 2 s (interval 1 s, backoff 2)
    assert 0.9 <= gaps[0] < 1.9 and 1.9 <= gaps[1] < 3.5, gaps


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


@pytest.mark.parametrize("retry_after_s", [0, 2])
def test_429_retry_after_replaces_the_backoff(
    engine: StepEngine, http_server: ScriptedHttpServer, retry_after_s: int
) -> None:
    http_server.script(
        "/limited", Reply(429, "slow down", {"Retry-After": str(retry_after_s)}), Reply(200, {"ok": 1})
    )
    stamps = Stamps(http_server, "/limited")
    view = engine.run("httpsteps.call", {"method": "GET", "url": http_server.url("/limited")})
    (gap,) = stamps.stop()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["steps"][0]["attempts"] == 2
    # the default backoff would wait 1 s; the server's word wins in both directions
    # (10 ms slack: the engine keeps retry times on the wall clock, which NTP may slew against the
    # monotonic clock the server stamps with)
    assert retry_after_s - 0.01 <= gap < retry_after_s + 0.8, gap


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
