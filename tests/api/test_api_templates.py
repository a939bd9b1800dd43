"""Parameter templates (recipes) through the HTTP API of a real gateway: engineers save versions and
choose the active one, operators start runs from it and only from it, every change is on record."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.api.conftest import ApiGateway
from tests.api.test_api_runs import _one_line_error


def _fresh_name() -> str:
    return f"fill-{uuid.uuid4().hex[:8]}"


def _save(api: ApiGateway, name: str, role: str = "engineer", **body: object) -> int:
    answer = api.call("POST", "/api/v1/templates", role,
                      json={"name": name, "workflow": "api.batch", **body})
    assert answer.status_code == 201, answer.text
    version: int = answer.json()["version"]
    return version


def test_versions_are_appended_and_exactly_one_is_active(api: ApiGateway) -> None:
    name = _fresh_name()
    assert _save(api, name, params={"target_level": 5.0}, note="first try") == 1
    assert _save(api, name, params={"target_level": 7.0}) == 2
    assert _save(api, name, params={"target_level": 9.0}, activate=False) == 3
    versions = api.call("GET", f"/api/v1/templates/{name}", "viewer").json()
    assert [(v["version"], v["active"], v["params"]) for v in versions] == [
        (3, False, {"target_level": 9.0}), (2, True, {"target_level": 7.0}), (1, False, {"target_level": 5.0})]
    assert versions[2]["note"] == "first try" and versions[2]["created_by"] == "token:engineer-token"
    listed = {t["name"]: t for t in api.call("GET", "/api/v1/templates", "viewer").json()}
    assert listed[name]["version"] == 2 and listed[name]["active"]

    activated = api.call("POST", f"/api/v1/templates/{name}/activate", "engineer",
                         json={"version": 1, "reason": "v2 overfills tank 3"})
    assert activated.status_code == 200, activated.text
    versions = api.call("GET", f"/api/v1/templates/{name}", "viewer").json()
    assert [v["version"] for v in versions if v["active"]] == [1]
    history = api.call("GET", f"/api/v1/templates/{name}/history", "viewer").json()
    assert [(h["action"], h["details"].get("version")) for h in history] == [
        ("save", 1), ("save", 2), ("save", 3), ("activate", 1)]
    assert history[-1]["actor"] == "token:engineer-token" and history[-1]["reason"] == "v2 overfills tank 3"


def test_an_operator_starts_from_the_active_version_and_the_run_names_it(api: ApiGateway) -> None:
    name = _fresh_name()
    _save(api, name, params={"target_level": 3.0, "line": 2})
    _save(api, name, params={"target_level": 4.0, "line": 3})
    api.call("POST", f"/api/v1/templates/{name}/activate", "engineer", json={"version": 1})
    answer = api.call("POST", "/api/v1/runs", "operator", json={"template": name, "options": {"partition_key": 2}})
    assert answer.status_code == 201, answer.text
    run = api.run(answer.json()["id"])
    assert run["params"] == {"target_level": 3.0, "line": 2} and run["partition_key"] == "2"
    assert run["created_by"] == "token:operator-token"
    marks = [e for e in run["events"] if e["kind"] == "template"]
    assert len(marks) == 1 and marks[0]["payload"] == {"name": name, "version": 1}, run["events"]
    assert marks[0]["actor"] == "token:operator-token"


def test_operators_may_not_start_free_parameters_nor_edit_templates(api: ApiGateway) -> None:
    name = _fresh_name()
    _save(api, name, params={"target_level": 1.0})
    free = api.call("POST", "/api/v1/runs", "operator", json={"workflow": "api.batch", "params": {"line": 9}})
    assert free.status_code == 403 and "engineer" in _one_line_error(free)
    for method, path, body in (
        ("POST", "/api/v1/templates", {"name": name, "workflow": "api.batch", "params": {}}),
        ("POST", f"/api/v1/templates/{name}/activate", {"version": 1}),
    ):
        refused = api.call(method, path, "operator", json=body)
        assert refused.status_code == 403, (path, refused.text)
        assert "engineer" in _one_line_error(refused)
    viewer = api.call("POST", "/api/v1/runs", "viewer", json={"template": name})
    assert viewer.status_code == 403 and "operator" in _one_line_error(viewer)
    assert [v["version"] for v in api.call("GET", f"/api/v1/templates/{name}", "viewer").json()] == [1]


@pytest.mark.parametrize("option", [{"priority": 100}, {"queue": "line9"}, {"timeout_seconds": 1.0},
                                    {"partition_key": "L1", "priority": -5}])
def test_an_operator_may_not_choose_priority_queue_or_timeout_of_a_template_run(
    api: ApiGateway, option: dict[str, Any]
) -> None:
    name = _fresh_name()
    _save(api, name, params={"target_level": 1.0})
    before = len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json())
    refused = api.call("POST", "/api/v1/runs", "operator", json={"template": name, "options": option})
    assert refused.status_code == 403, refused.text
    key = next(k for k in option if k != "partition_key")
    assert _one_line_error(refused) == (
        f"token:operator-token has role operator; options.{key} on a run from a template (the right 'start' may "
        "set partition_key and deduplication_id) needs the right 'start_free' (roles with it: engineer, admin)")
    assert len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json()) == before
    taken = api.call("POST", "/api/v1/runs", "engineer", json={"template": name, "options": option})
    assert taken.status_code == 201, taken.text  # an engineer may
    assert api.call("POST", f"/api/v1/runs/{taken.json()['id']}/cancel", "engineer", json={}).status_code == 202


def test_bad_templates_are_refused_naming_the_problem_and_nothing_is_stored(api: ApiGateway) -> None:
    name = _fresh_name()
    cases = [
        ("POST", "/api/v1/templates", {"name": name, "workflow": "api.batch", "params": {"tank": 3}}, 400, "tank"),
        ("POST", "/api/v1/templates", {"name": name, "workflow": "no.such", "params": {}}, 404, "no.such"),
        ("POST", "/api/v1/templates", {"name": "", "workflow": "api.batch", "params": {}}, 400, "name"),
        ("POST", "/api/v1/runs", {"template": name}, 404, name),
        ("POST", "/api/v1/runs", {"template": name, "workflow": "api.batch"}, 400, "template"),
        ("POST", "/api/v1/runs", {}, 400, "template"),
        ("POST", f"/api/v1/templates/{name}/activate", {"version": 1}, 404, name),
        ("GET", f"/api/v1/templates/{name}", None, 404, name),
    ]
    for method, path, body, status, named in cases:
        answer = api.call(method, path, "admin", json=body)
        assert answer.status_code == status, (path, body, answer.text)
        assert named in _one_line_error(answer), (path, body, answer.text)
    _save(api, name, params={"target_level": 2.0})
    with_params = api.call("POST", "/api/v1/runs", "operator", json={"template": name, "params": {"line": 4}})
    assert with_params.status_code == 400 and "params" in _one_line_error(with_params)
    missing = api.call("POST", f"/api/v1/templates/{name}/activate", "engineer", json={"version": 5})
    assert missing.status_code == 404 and "5" in _one_line_error(missing)
    assert [v["version"] for v in api.call("GET", f"/api/v1/templates/{name}", "viewer").json()] == [1]


def test_the_workflow_listing_describes_each_parameter_for_a_form(api: ApiGateway) -> None:
    listed = {w["name"]: w for w in api.call("GET", "/api/v1/workflows", "viewer").json()}
    inputs = {i["name"]: i for i in listed["api.batch"]["inputs"]}
    # no annotation: the check takes any JSON, the form offers a number input as the default suggests
    assert inputs["target_level"] == {"name": "target_level", "type": "json", "nullable": True, "choices": [],
                                      "required": False, "default": 40.0, "kind": "number"}
    assert inputs["line"]["kind"] == "integer" and inputs["line"]["default"] == 1
