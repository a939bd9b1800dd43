"""The HTTP API against a real gateway process: every route, every role allowed and refused, the audit's
actor and reason, bad input answered with one line, the run stream, metrics and health."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from tests.api.conftest import ApiGateway
from tests.harness import wait_until

# route -> the lowest role allowed (None: no credential needed)
ROUTES: list[tuple[str, str, str | None]] = [
    ("GET", "/api/v1/workflows", "viewer"),
    ("GET", "/api/v1/runs", "viewer"),
    ("GET", "/api/v1/runs/{run_id}", "viewer"),
    ("POST", "/api/v1/runs", "engineer"),
    ("POST", "/api/v1/runs/{run_id}/commands", "operator"),
    ("POST", "/api/v1/runs/{run_id}/cancel", "engineer"),
    ("GET", "/api/v1/session", "viewer"),
]
ORDER = ["viewer", "operator", "engineer", "admin"]


def _one_line_error(answer: requests.Response) -> str:
    body = answer.json()
    assert set(body) == {"error"} and "\n" not in body["error"] and body["error"], body
    message: str = body["error"]
    return message


def test_health_openapi_and_metrics_need_no_credential(api: ApiGateway) -> None:
    health = api.call("GET", "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    spec = api.call("GET", "/openapi.json").json()
    for method, path, _ in ROUTES:
        assert method.lower() in spec["paths"][path], path
    assert "get" in spec["paths"]["/api/v1/runs/{run_id}/stream"]
    api.start()
    metrics = api.call("GET", "/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'exchange_runs{status="RUNNING"}' in text or 'exchange_runs{status="ENQUEUED"}' in text
    assert "exchange_store_write_seconds_bucket" in text and "exchange_steps_recorded_total" in text


def test_every_api_route_refuses_a_missing_or_bad_credential(api: ApiGateway) -> None:
    run_id = api.start()
    for method, path, _ in ROUTES:
        url = path.replace("{run_id}", run_id)
        for headers in ({}, {"Authorization": "Bearer exch_000000000000_nope"}, {"Authorization": "Basic eDp5"}):
            answer = api.call(method, url, headers=headers, json={"cmd": "HOLD", "workflow": "api.batch"})
            assert answer.status_code == 401, (method, url, headers, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer")
            _one_line_error(answer)


@pytest.mark.parametrize("role", ORDER)
def test_each_role_may_do_what_its_rank_allows_and_nothing_more(api: ApiGateway, role: str) -> None:
    run_id = api.start()
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="the run to report RUNNING")
    bodies: dict[str, Any] = {
        "/api/v1/runs": {"workflow": "api.batch", "params": {"target_level": 1.0}},
        "/api/v1/runs/{run_id}/commands": {"cmd": "RESUME", "reason": "role check"},
        "/api/v1/runs/{run_id}/cancel": {"reason": "role check"},
    }
    for method, path, needed in ROUTES:
        if path.endswith("/cancel"):
            continue  # cancelling ends the run the other routes use: checked below
        answer = api.call(method, path.replace("{run_id}", run_id), role, json=bodies.get(path))
        if ORDER.index(role) >= ORDER.index(needed or "viewer"):
            assert answer.status_code < 300, (role, path, answer.text)
        else:
            assert answer.status_code == 403, (role, path, answer.text)
            message = _one_line_error(answer)
            assert role in message and (needed or "") in message
    cancel = api.call("POST", f"/api/v1/runs/{run_id}/cancel", role, json=bodies["/api/v1/runs/{run_id}/cancel"])
    assert cancel.status_code == (202 if ORDER.index(role) >= ORDER.index("engineer") else 403), cancel.text


def test_hold_and_resume_are_applied_and_audited_with_the_caller_and_reason(api: ApiGateway) -> None:
    run_id = api.start()
    assert api.run(run_id)["created_by"] == "token:engineer-token"
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING")
    hold = api.call("POST", f"/api/v1/runs/{run_id[:8]}/commands", "operator",
                    json={"cmd": "hold", "reason": "pump cavitating"})
    assert hold.status_code == 202 and hold.json()["warning"] is None, hold.text
    wait_until(lambda: api.run(run_id)["state"] == "HELD", 20, message="HELD")
    again = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "HOLD"})
    assert again.status_code == 202 and "HELD" in again.json()["warning"], again.text  # said, not hidden
    strict = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "HOLD", "strict": True})
    assert strict.status_code == 409, strict.text
    resume = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator",
                      json={"cmd": "RESUME", "reason": "pump fixed"})
    assert resume.status_code == 202
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING again")
    sent = [e for e in api.run(run_id)["events"] if e["kind"] == "command_sent"]
    assert [(e["actor"], e["reason"]) for e in sent][0] == ("token:operator-token", "pump cavitating")
    assert ("token:operator-token", "pump fixed") in [(e["actor"], e["reason"]) for e in sent]
    cancel = api.call("POST", f"/api/v1/runs/{run_id}/cancel", "engineer", json={"reason": "end of test"})
    assert cancel.status_code == 202
    wait_until(lambda: api.run(run_id)["status"] == "CANCELLED", 20, message="CANCELLED")
    events = api.run(run_id)["events"]
    assert any(e["actor"] == "token:engineer-token" and e["reason"] == "end of test" for e in events), events


def test_abort_is_accepted_in_held_and_ends_the_run_aborted(api: ApiGateway) -> None:
    run_id = api.start()
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING")
    api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "HOLD"})
    wait_until(lambda: api.run(run_id)["state"] == "HELD", 20, message="HELD")
    abort = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator",
                     json={"cmd": "abort", "reason": "leak at V-101", "strict": True})
    assert abort.status_code == 202 and abort.json()["warning"] is None, abort.text
    wait_until(lambda: api.run(run_id)["status"] == "SUCCESS", 20, message="the run ended by the ABORT")
    view = api.run(run_id)
    assert view["state"] == "ABORTED"
    (taken,) = [e for e in view["events"] if e["kind"] == "command" and e["payload"]["cmd"] == "ABORT"]
    assert (taken["actor"], taken["reason"], taken["payload"]["state"]) == (
        "token:operator-token", "leak at V-101", "HELD")


def test_listing_and_filters(api: ApiGateway) -> None:
    run_id = api.start(line=7)
    wait_until(lambda: api.run(run_id)["status"] == "RUNNING", 20, message="RUNNING")
    listed = api.call("GET", "/api/v1/runs", "viewer", params={"workflow": "api.batch", "limit": 1000}).json()
    assert run_id in [r["id"] for r in listed]
    running = api.call("GET", "/api/v1/runs", "viewer", params={"status": "running", "limit": 1000}).json()
    assert running and {r["status"] for r in running} == {"RUNNING"}
    assert run_id not in [r["id"] for r in api.call("GET", "/api/v1/runs", "viewer",
                                                     params={"status": "SUCCESS", "limit": 1000}).json()]
    workflows = api.call("GET", "/api/v1/workflows", "viewer").json()
    assert [w["name"] for w in workflows] == ["api.batch"]
    assert workflows[0]["parameters"] == ["target_level", "line"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "words"),
    [
        ("POST", "/api/v1/runs", {"workflow": "no.such"}, 404, "no.such"),
        ("POST", "/api/v1/runs", {"workflow": "api.batch", "params": {"volume": 3}}, 400, "volume"),
        ("POST", "/api/v1/runs", {"workflow": "api.batch", "options": {"colour": "red"}}, 400, "colour"),
        ("POST", "/api/v1/runs", {"workflow": "api.batch", "options": {"priority": "high"}}, 400, "priority"),
        ("POST", "/api/v1/runs", {"params": {}}, 400, "workflow"),
        ("POST", "/api/v1/runs", b'{"workflow": "api.batch",', 400, "JSON"),
        ("POST", "/api/v1/runs", b"x" * 2_000_000, 413, "max_body_bytes"),
        ("POST", "/api/v1/runs/{run_id}/commands", {"cmd": "EXPLODE"}, 400, "EXPLODE"),
        ("POST", "/api/v1/runs/{run_id}/commands", {"reason": "no cmd"}, 400, "cmd"),
        ("GET", "/api/v1/runs/0123456789", None, 404, "0123456789"),
        ("GET", "/api/v1/runs/012", None, 404, "'012': a run id prefix needs at least 4 characters"),
        ("GET", "/api/v1/runs?status=BOILING", None, 400, "BOILING"),
        ("GET", "/api/v1/runs?limit=-1", None, 400, "limit"),
        ("POST", "/api/v1/runs/ffffffff-0000-0000-0000-000000000000/cancel", {}, 404, "ffffffff"),
    ],
)
def test_bad_input_gets_a_4xx_with_one_line_naming_what_is_wrong(
    api: ApiGateway, method: str, path: str, body: Any, status: int, words: str
) -> None:
    run_id = api.start()
    before = len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json())
    kwargs: dict[str, Any] = {"data": body, "headers": {"Content-Type": "application/json"}} if isinstance(
        body, bytes) else {"json": body}
    answer = api.call(method, path.replace("{run_id}", run_id), "admin", **kwargs)
    assert answer.status_code == status, answer.text
    assert words in _one_line_error(answer)
    after = len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json())
    assert after == before  # nothing was started by a refused request


def test_security_headers_on_every_answer(api: ApiGateway) -> None:
    for answer in (api.call("GET", "/healthz"), api.call("GET", "/api/v1/runs"),
                   api.call("GET", "/api/v1/runs", "viewer")):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert "server" not in answer.headers


def test_the_stream_shows_progress_and_state_changes_live_and_ends_with_the_run(api: ApiGateway) -> None:
    run_id = api.start(target_level=1000.0)
    seen: list[dict[str, Any]] = []
    with requests.get(f"{api.url}/api/v1/runs/{run_id}/stream", stream=True, timeout=30,
                      headers={"Authorization": f"Bearer {api.tokens['viewer']}"}) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        held_sent = stop_sent = False
        for line in stream.iter_lines(decode_unicode=True):
            if not line.startswith("data: "):
                continue
            seen.append(json.loads(line[len("data: "):]))
            levels = [e["progress"]["extra"]["level"] for e in seen if e["progress"] and e["progress"]["extra"]]
            if len(set(levels)) >= 3 and not held_sent:
                held_sent = True
                api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "HOLD"})
            if seen[-1]["state"] == "HELD" and not stop_sent:
                stop_sent = True
                api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "STOP"})
    assert held_sent and stop_sent
    assert seen[-1]["status"] == "SUCCESS" and seen[-1]["state"] == "STOPPED"
    unknown = api.call("GET", "/api/v1/runs/ffffffff-0000-0000-0000-000000000000/stream", "viewer")
    assert unknown.status_code == 404


def test_the_runs_listing_stream_sends_the_list_and_refuses_a_bad_filter(api: ApiGateway) -> None:
    run_id = api.start()
    refused = api.call("GET", "/api/v1/streams/runs?since=forever", "viewer")
    assert refused.status_code == 400 and "forever" in _one_line_error(refused)
    assert api.call("GET", "/api/v1/streams/runs").status_code == 401
    with api.call("GET", "/api/v1/streams/runs?workflow=api.batch&since=1h", "viewer", stream=True) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        lines = answer.iter_lines(decode_unicode=True)
        assert next(lines) == "event: runs"
        data = json.loads(next(lines).removeprefix("data: "))
    assert run_id in [run["id"] for run in data] and {run["workflow"] for run in data} == {"api.batch"}
