"""Every JSON body of the HTTP API against a real gateway: an unknown (misspelt) field, a loose boolean
or a string for a number is refused with 400 naming the field, and the request has no effect (nothing
deleted, cancelled, sent, saved or started); a command's ``args`` reach the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._api import routes_runs
from exchange._engine.operator import start_options
from exchange._store.gateways.gateway_settings import RETENTION
from tests.api.conftest import PASSWORD, ApiGateway, start_api_gateway
from tests.api.test_api_runs import _one_line_error
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

UNKNOWN = "zz_not_a_field"

APP = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows


@workflow(name="api.quick", description="finishes at once")
def quick():
    return {"done": True}


@workflow(name="api.listener", description="returns the first operator command it receives")
def listener():
    rt = getWorkflows()
    rt.setState("RUNNING")
    while True:
        command = rt.recvCommand(timeoutSeconds=0.5)
        if command is not None:
            return {"cmd": command["cmd"], "reason": command["reason"], "args": command.get("args")}
'''


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    """A gateway whose retention would delete all finished runs but the newest (when applied: its own
    schedule waits a week)."""
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("bodies")), zygote=exchange_zygote)
    env.write_app("bodies_app", APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write("\n[retention]\nmax_finished_runs = 1\ninterval_minutes = 10080\n")
    store = env.runtime().store
    for gateway in start_api_gateway(env):
        # The gateway applies retention once when it starts; the runs of the tests must come after it.
        wait_until(lambda: store.control.get(RETENTION) is not None, 30, message="the gateway's first retention")
        yield gateway


def _refused(answer: Any, *words: str) -> str:
    assert answer.status_code == 400, answer.text
    message = _one_line_error(answer)
    for word in words:
        assert word in message, (word, message)
    return message


def _start(api: ApiGateway, workflow: str, **options: Any) -> str:
    answer = api.call("POST", "/api/v1/runs", "engineer", json={"workflow": workflow, "options": options})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    return run_id


def _status(api: ApiGateway, run_id: str) -> str:
    status: str = api.run(run_id)["status"]
    return status


def _run_count(api: ApiGateway) -> int:
    return len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json())


def test_a_misspelt_dry_run_deletes_nothing(api: ApiGateway) -> None:
    finished = [_start(api, "api.quick") for _ in range(3)]
    for run_id in finished:
        wait_until(lambda run_id=run_id: _status(api, run_id) == "SUCCESS", 30, message="the quick runs")
    _refused(api.call("POST", "/api/v1/retention/apply", "admin", json={"dryRun": True}),
             '"dryRun"', '"dry_run"')
    for loose in ("yes", 1, "true"):
        _refused(api.call("POST", "/api/v1/retention/apply", "admin", json={"dry_run": loose}), "dry_run")
    assert [api.call("GET", f"/api/v1/runs/{run_id}", "viewer").status_code for run_id in finished] == [200] * 3
    counted = api.call("POST", "/api/v1/retention/apply", "admin", json={"dry_run": True})
    assert counted.status_code == 200 and counted.json()["by_count"] >= 2, counted.text  # it would delete them
    assert [api.call("GET", f"/api/v1/runs/{run_id}", "viewer").status_code for run_id in finished] == [200] * 3


def test_a_misspelt_queue_or_reason_changes_no_maintenance_and_cancels_nothing(api: ApiGateway) -> None:
    assert api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "drain", "reason": "bodies"}).ok
    try:
        line1 = [_start(api, "api.quick", queue="line1") for _ in range(2)]
        line2 = [_start(api, "api.quick", queue="line2") for _ in range(2)]
        _refused(api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "cancel", "queu": "line2"}),
                 '"queu"', '"queue"')
        assert [_status(api, run_id) for run_id in line1 + line2] == ["ENQUEUED"] * 4
        _refused(api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "normal", "reasn": "x"}),
                 '"reasn"', '"reason"')
        status = api.call("GET", "/api/v1/maintenance", "viewer").json()
        assert (status["mode"], status["reason"]) == ("drain", "bodies")
        cancelled = api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "cancel", "queue": "line2"})
        assert cancelled.status_code == 200, cancelled.text
        assert [_status(api, run_id) for run_id in line1 + line2] == ["ENQUEUED"] * 2 + ["CANCELLED"] * 2
    finally:
        assert api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "normal"}).ok
    for run_id in line1:
        wait_until(lambda run_id=run_id: _status(api, run_id) == "SUCCESS", 30, message="line1 after maintenance")


def test_a_bad_command_body_sends_nothing_and_args_reach_the_run(api: ApiGateway) -> None:
    run_id = _start(api, "api.listener")
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 30, message="the listener RUNNING")
    path = f"/api/v1/runs/{run_id}/commands"
    _refused(api.call("POST", path, "operator", json={"cmd": "HOLD", "reasn": "x"}), '"reasn"', '"reason"')
    _refused(api.call("POST", path, "operator", json={"cmd": "HOLD", "strict": "no"}), "strict")
    _refused(api.call("POST", path, "operator", json={"cmd": "HOLD", "strict": 1}), "strict")
    _refused(api.call("POST", path, "operator", json={"cmd": 7}), "cmd")
    view = api.run(run_id)
    assert view["status"] == "RUNNING" and not [e for e in view["events"] if e["kind"] == "command_sent"], view
    args = {"setpoint_c": 72.5, "valves": ["V1", "V3"]}
    sent = api.call("POST", path, "operator", json={"cmd": "HOLD", "reason": "sample", "args": args})
    assert sent.status_code == 202, sent.text
    wait_until(lambda: _status(api, run_id) == "SUCCESS", 30, message="the listener to take the command")
    assert api.run(run_id)["result"] == {"cmd": "HOLD", "reason": "sample", "args": args}


def test_a_misspelt_cancel_reason_cancels_nothing(api: ApiGateway) -> None:
    run_id = _start(api, "api.listener")
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 30, message="the listener RUNNING")
    _refused(api.call("POST", f"/api/v1/runs/{run_id}/cancel", "engineer", json={"reson": "x"}),
             '"reson"', '"reason"')
    view = api.run(run_id)
    assert (view["status"], view["cancel_requested"]) == ("RUNNING", False), view
    assert api.call("POST", f"/api/v1/runs/{run_id}/cancel", "engineer", json={"reason": "done"}).status_code == 202
    wait_until(lambda: _status(api, run_id) == "CANCELLED", 30, message="cancelled")


def test_a_misspelt_template_field_saves_nothing(api: ApiGateway) -> None:
    body = {"name": "bodies-recipe", "workflow": "api.batch", "params": {"line": 2}}
    _refused(api.call("POST", "/api/v1/templates", "engineer", json={**body, "activte": False}),
             '"activte"', '"activate"')
    _refused(api.call("POST", "/api/v1/templates", "engineer", json={**body, "activate": "no"}), "activate")
    assert api.call("GET", "/api/v1/templates/bodies-recipe", "viewer").status_code == 404
    assert api.call("POST", "/api/v1/templates", "engineer", json={**body, "activate": False}).status_code == 201
    _refused(api.call("POST", "/api/v1/templates/bodies-recipe/activate", "engineer", json={"version": "1"}),
             "version")
    _refused(api.call("POST", "/api/v1/templates/bodies-recipe/activate", "engineer",
                      json={"version": 1, "reasn": "x"}), '"reasn"')
    versions = api.call("GET", "/api/v1/templates/bodies-recipe", "viewer").json()
    assert [(v["version"], v["active"]) for v in versions] == [(1, False)]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"workflow": "api.quick", "option": {"priority": 5}}, ('"option"', '"options"')),
        ({"workflow": "api.quick", "options": {"prio": 5}}, ('options', '"prio"', '"priority"')),
        ({"workflow": "api.quick", "options": {"priority": True}}, ("options.priority",)),
        ({"workflow": "api.quick", "options": {"priority": "5"}}, ("options.priority",)),
        ({"workflow": "api.quick", "options": {"timeout_seconds": "60"}}, ("options.timeout_seconds",)),
        ({"workflow": "api.quick", "options": {"queue": 2}}, ("options.queue",)),
        ({"workflow": "api.quick", "params": [1]}, ("params",)),
        ({"workflow": 5}, ("workflow",)),
    ],
)
def test_a_bad_start_body_starts_nothing(api: ApiGateway, body: dict[str, Any], words: tuple[str, ...]) -> None:
    before = _run_count(api)
    _refused(api.call("POST", "/api/v1/runs", "admin", json=body), *words)
    assert _run_count(api) == before


def test_start_options_keep_working(api: ApiGateway) -> None:
    run_id = _start(api, "api.quick", queue="line9", partition_key=7, priority=3, timeout_seconds=60,
                    deduplication_id="bodies-dedup")
    view = api.run(run_id)
    assert (view["queue"], view["partition_key"], view["priority"]) == ("line9", "7", 3), view
    assert _start(api, "api.quick", deduplication_id="bodies-dedup") == run_id


def test_the_api_start_options_are_the_runtimes() -> None:
    """``options`` of POST /runs names each start option of the runtime but ``actor`` (the caller)."""
    assert set(routes_runs.StartOptions.model_fields) == set(routes_runs.START_OPTIONS)
    assert set(routes_runs.START_OPTIONS.values()) == set(start_options.START_OPTIONS) - {"actor"}


# a valid body per route: the walk adds one unknown field to it (a route missing here gets a minimal
# body made from its schema's required fields)
VALID_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/api/v1/session"): {"user": "admin-user", "password": PASSWORD},
    ("post", "/api/v1/runs"): {"workflow": "api.quick", "params": {}, "options": {"priority": 1}},
    ("post", "/api/v1/runs/{run_id}/commands"): {"cmd": "HOLD", "reason": "walk"},
    ("post", "/api/v1/runs/{run_id}/cancel"): {"reason": "walk"},
    ("post", "/api/v1/templates"): {"name": "walk", "workflow": "api.batch", "params": {}},
    ("post", "/api/v1/templates/{name}/activate"): {"version": 1},
    ("post", "/api/v1/maintenance"): {"mode": "normal"},
    ("post", "/api/v1/retention/apply"): {"dry_run": True},
}
_PLACEHOLDERS: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.0, "boolean": False, "object": {},
                                 "array": []}


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _objects(spec: dict[str, Any], schema: dict[str, Any], seen: set[str]) -> Iterator[dict[str, Any]]:
    """Every object schema a body may hold: itself, its properties', through $ref and anyOf."""
    ref = schema.get("$ref")
    if ref is not None:
        if ref in seen:
            return
        seen.add(ref)
    schema = _resolve(spec, schema)
    if schema.get("type") == "object" and "properties" in schema:
        yield schema
    for child in [*schema.get("properties", {}).values(), *schema.get("anyOf", ()), *schema.get("allOf", ())]:
        yield from _objects(spec, child, seen)


def _minimal(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    schema = _resolve(spec, schema)
    body: dict[str, Any] = {}
    for name in schema.get("required", ()):
        field = _resolve(spec, schema["properties"][name])
        body[name] = field["enum"][0] if "enum" in field else _PLACEHOLDERS.get(field.get("type", "string"), "x")
    return body


def test_every_json_body_route_refuses_an_unknown_field_naming_it(api: ApiGateway) -> None:
    """Walks the running API's OpenAPI description, so a route added later cannot forget the check."""
    run_id = _start(api, "api.listener")
    spec = api.call("GET", "/openapi.json").json()
    walked: list[tuple[str, str]] = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            schema = content["application/json"]["schema"]
            for obj in _objects(spec, schema, set()):  # the description says so too, for clients
                assert obj.get("additionalProperties") is False, (method, path, obj)
            body = dict(VALID_BODIES.get((method, path)) or _minimal(spec, schema))
            body[UNKNOWN] = 1
            url = path.replace("{run_id}", run_id).replace("{name}", "walk")
            answer = api.call(method.upper(), url, "admin", json=body)
            message = _refused(answer, f'"{UNKNOWN}"')
            assert "\n" not in message
            walked.append((method, path))
    assert set(VALID_BODIES) <= set(walked), walked  # the walk saw the routes it knows of
    view = api.run(run_id)
    assert view["status"] == "RUNNING" and not [e for e in view["events"] if e["kind"] == "command_sent"], view
    assert api.call("GET", "/api/v1/templates/walk", "viewer").status_code == 404
    assert api.call("POST", f"/api/v1/runs/{run_id}/cancel", "engineer", json={}).status_code == 202


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_json_body_not_in_utf_8_is_refused_and_starts_nothing(api: ApiGateway, encoding: str) -> None:
    """JSON is UTF-8 (RFC 8259); Python's json.loads of bytes would guess UTF-16/32 and take it."""
    before = _run_count(api)
    body = '{"workflow": "api.quick", "options": {"queue": "utf16"}}'.encode(encoding)
    answer = api.call("POST", "/api/v1/runs", "engineer", data=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert "the body is not UTF-8" in _one_line_error(answer)
    assert _run_count(api) == before


def test_a_json_body_declared_in_another_charset_is_415(api: ApiGateway) -> None:
    before = _run_count(api)
    body = '{"workflow": "api.quick"}'
    answer = api.call("POST", "/api/v1/runs", "engineer", data=body.encode("utf-16"),
                      headers={"Content-Type": "application/json; charset=UTF-16"})
    assert answer.status_code == 415, answer.text
    assert _one_line_error(answer) == ("the body must be JSON in UTF-8, not utf-16 "
                                       "(Content-Type: application/json; charset=utf-8)")
    latin = api.call("POST", "/api/v1/runs", "engineer", data=body.encode("latin-1"),
                     headers={"Content-Type": 'application/json; charset="iso-8859-1"'})
    assert latin.status_code == 415, latin.text
    assert _run_count(api) == before
    taken = api.call("POST", "/api/v1/runs", "engineer", data=b'{"workflow": "api.quick", "params": {}}',
                     headers={"Content-Type": "application/json; charset=utf-8"})
    assert taken.status_code == 201, taken.text


def test_bytes_that_are_not_utf_8_in_a_json_string_are_refused(api: ApiGateway) -> None:
    before = _run_count(api)
    for raw in (b'{"workflow": "api.quick", "options": {"queue": "K\xfchl"}}',  # Latin-1
                b'{"workflow": "api.quick", "options": {"queue": "\xed\xa0\x80"}}'):  # a UTF-8-encoded surrogate
        answer = api.call("POST", "/api/v1/runs", "engineer", data=raw, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert "the body is not UTF-8: byte 0x" in _one_line_error(answer)
    assert _run_count(api) == before
