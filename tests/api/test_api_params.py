"""The one parameter check through a real gateway's HTTP entries: ``POST /api/v1/runs``, templates
saved (``POST /api/v1/templates``) and started by an operator (one saved before the workflow's
parameters changed), and the console's start form; ``GET /api/v1/workflows`` describes exactly
what the check enforces. Every case of tests/paramcases.py is refused (400 naming the parameter)
and no run nor template version is stored. One gateway for the module, on SQLite."""

from __future__ import annotations

import html
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from exchange._store import codec
from tests.api.conftest import ApiGateway, start_api_gateway
from tests.api.test_api_runs import _one_line_error
from tests.console.test_console_http import _session
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.paramcases import ACCEPTED, APP, VALVE, Case, refused_cases


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api-params")), zygote=exchange_zygote)
    env.write_app("params_app", APP)
    yield from start_api_gateway(env)


def _runs(api: ApiGateway) -> int:
    assert api.env.sqlite_path is not None
    with closing(sqlite3.connect(api.env.sqlite_path)) as conn:
        return int(conn.execute("SELECT count(*) FROM exchange_runs").fetchone()[0])


def _start(api: ApiGateway, params: dict[str, Any]) -> Any:
    return api.call("POST", "/api/v1/runs", "engineer", json={"workflow": VALVE, "params": params})


@pytest.mark.parametrize("case", refused_cases())
def test_post_runs_refuses_with_400_naming_the_parameter(api: ApiGateway, case: Case) -> None:
    before = _runs(api)
    refused = _start(api, case.params)
    assert refused.status_code == 400, refused.text
    assert case.named in _one_line_error(refused)
    assert _runs(api) == before


@pytest.mark.parametrize(("params", "x"), [pytest.param(p, x, id=name) for name, p, _, x in ACCEPTED])
def test_post_runs_takes_what_fits_as_sent(api: ApiGateway, params: dict[str, Any], x: Any) -> None:
    started = _start(api, params)
    assert started.status_code == 201, started.text
    assert api.run(started.json()["id"])["params"] == params


def _inputs(api: ApiGateway) -> dict[str, dict[str, Any]]:
    workflows = api.call("GET", "/api/v1/workflows", "viewer").json()
    (valve,) = [w for w in workflows if w["name"] == VALVE]
    return {spec["name"]: spec for spec in valve["inputs"]}


def _good(spec: dict[str, Any]) -> Any:
    if spec["choices"]:
        return spec["choices"][-1]
    return {"float": 1.5, "int": 2, "bool": True, "str": "s", "list": [], "dict": {"k": 1.0},
            "json": {"any": [1, None]}}[spec["type"]]


def _bad(spec: dict[str, Any]) -> list[Any]:
    """Values of the wrong type for ``spec`` as described (none for a json one: it takes any)."""
    if spec["type"] == "json":
        return []
    wrong = {"float": "1.5", "int": 1.5, "bool": 1, "str": 1, "list": {}, "dict": []}[spec["type"]]
    found = [wrong] + ([] if spec["nullable"] else [None])
    if spec["choices"]:
        found.append("not-a-choice")
    if spec.get("values"):
        found.append({"k": "1.0"})
    return found


def test_get_workflows_describes_exactly_what_the_check_enforces(api: ApiGateway) -> None:
    inputs = _inputs(api)
    assert inputs["x"] == {"name": "x", "type": "float", "nullable": False, "choices": [], "required": True,
                           "default": None, "kind": "number"}
    assert (inputs["mode"]["type"], inputs["mode"]["choices"], inputs["mode"]["default"]) == (
        "str", ["auto", "manual"], "auto")
    assert (inputs["count"]["type"], inputs["flush"]["type"]) == ("int", "bool")
    assert (inputs["trim"]["type"], inputs["trim"]["nullable"], inputs["trim"]["required"]) == ("float", True, False)
    assert inputs["limits"]["values"] == {"type": "float", "nullable": False, "choices": []}
    assert inputs["trigger_value"]["type"] == "json"
    required = {name: _good(spec) for name, spec in inputs.items() if spec["required"]}
    before = _runs(api)
    for name, spec in inputs.items():  # what the description calls wrong is refused, naming the parameter
        for value in _bad(spec):
            refused = _start(api, {**required, name: value})
            assert refused.status_code == 400, (name, value, refused.text)
            assert f"parameter '{name}" in _one_line_error(refused), (name, value)
    assert _runs(api) == before
    every = {name: _good(spec) for name, spec in inputs.items()}  # and what it calls right is taken
    assert _start(api, every).status_code == 201
    nulls = {**required, **{name: None for name, spec in inputs.items() if spec["nullable"]}}
    assert _start(api, nulls).status_code == 201
    for name in required:
        missing = _start(api, {k: v for k, v in required.items() if k != name})
        assert missing.status_code == 400 and f"parameter '{name}' (" in _one_line_error(missing)


@pytest.mark.parametrize("case", refused_cases())
def test_a_template_that_does_not_fit_is_not_saved(api: ApiGateway, case: Case) -> None:
    name = f"recipe-{uuid.uuid4().hex[:8]}"
    refused = api.call("POST", "/api/v1/templates", "engineer", json={"name": name, "workflow": VALVE,
                                                                      "params": case.params})
    assert refused.status_code == 400, refused.text
    assert case.named in _one_line_error(refused)
    assert api.call("GET", f"/api/v1/templates/{name}", "viewer").status_code == 404


@pytest.mark.parametrize("case", refused_cases())
def test_an_operator_cannot_start_an_old_template_that_no_longer_fits(api: ApiGateway, case: Case) -> None:
    name = f"old-{uuid.uuid4().hex[:8]}"
    runtime = api.env.runtime()  # the version is written as one saved before the workflow changed
    runtime.store.templates.add_version(name, VALVE, codec.dumps(case.params), note=None, actor="engineer-user",
                                        activate=True)
    runtime.close()
    before = _runs(api)
    refused = api.call("POST", "/api/v1/runs", "operator", json={"template": name})
    assert refused.status_code == 400, refused.text
    message = _one_line_error(refused)
    assert message.startswith(f"template '{name}' v1 does not fit its workflow now: ") and case.named in message
    assert _runs(api) == before


# ----- the console's start form ----------------------------------------------------------------------
def _problem(page: str) -> str:
    found = re.search(r'<p class="problem" role="alert">(.*?)</p>', page, re.S)
    assert found, page
    return html.unescape(found.group(1))


@pytest.mark.parametrize(("fields", "named"), [
    ({"param.x": "ten"}, "x: 'ten' is not a number"),
    ({"param.x": ""}, "x: a value is required"),
    ({"param.x": "1.5", "param.mode": "turbo"}, "mode: 'turbo' is not one of auto, manual"),
    ({"param.x": "1.5", "param.count": "seven"}, "count: 'seven' is not a whole number"),
    ({"param.x": "1.5", "param.count": "3.5"}, "count: '3.5' is not a whole number"),
    ({"param.x": "1.5", "param.flush": "maybe"}, "flush: 'maybe' is neither true nor false"),
    # what the form's own conversion lets through, the shared check refuses
    ({"param.x": "1.5", "param.limits": '{"hi": "90"}'}, '''parameter 'limits["hi"]' expects float, got "90" (str)'''),
    ({"param.x": "1.5", "param.limits": "[90]"}, "parameter 'limits' expects dict of float or null, got [90] (list)"),
])
@pytest.mark.parametrize("action", ["start", "save"])
def test_the_console_form_refuses_naming_the_field_and_stores_nothing(api: ApiGateway, fields: dict[str, str],
                                                                      named: str, action: str) -> None:
    session, csrf = _session(api, "engineer")
    name = f"form-{uuid.uuid4().hex[:8]}"
    before = _runs(api)
    page = session.post(f"{api.url}/start/{VALVE}", allow_redirects=False, timeout=20,
                        data={**fields, "action": action, "template_name": name, "csrf_token": csrf})
    assert page.status_code == 400, page.status_code
    assert named in _problem(page.text)
    assert _runs(api) == before
    assert api.call("GET", f"/api/v1/templates/{name}", "viewer").status_code == 404


def test_the_console_form_starts_what_fits(api: ApiGateway) -> None:
    session, csrf = _session(api, "engineer")
    page = session.post(f"{api.url}/start/{VALVE}", allow_redirects=False, timeout=20,
                        data={"param.x": "10", "param.limits": '{"hi": 90}', "param.mode": "manual",
                              "action": "start", "csrf_token": csrf})
    assert page.status_code == 303, page.text
    run_id = page.headers["location"].removeprefix("/runs/").split("?")[0]
    assert api.run(run_id)["params"] == {"x": 10.0, "mode": "manual", "flush": False, "limits": {"hi": 90}}
