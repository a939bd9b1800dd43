"""Operator prompts through the HTTP API of a real gateway: listed, answered (200), answered for
verification (202) and verified by a second person; refused below the prompt's role (403), for a
value that breaks a field (400 naming it, the prompt still open: blank text, a pattern missed, a
control character or a lone surrogate), when not open (409). Two-person verification is between two
persons: users with their password in the body (or a console session), never API tokens, which are
programs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.api.conftest import PASSWORD, ApiGateway, add_roles, console_sign_in, start_api_gateway
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

PROMPT_APP = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import operator


@workflow(name="api.lab")
def lab(verify_role=None, role="operator"):
    return operator.prompt(
        "lab_result", "Enter the lab result for batch B-200",
        fields={"density": {"type": "float", "min": 0.9, "max": 1.2, "unit": "g/cm3"},
                "approved": {"type": "bool"},
                "grade": {"type": "choice", "choices": ["A", "B", "C"]},
                "note": {"type": "text", "required": False}},
        role=role, verify_role=verify_role)


@workflow(name="api.sample")
def sample(labelled=False):
    lot = {"type": "text", "label": "Lot number", "pattern": r"^L-\\d{6}$"} if labelled else {"type": "text"}
    note = {"type": "text", "required": False}
    return operator.prompt("sample", "Name the sample", fields={"lot": lot, "note": note})
'''
GOOD = {"density": 1.02, "approved": True, "grade": "B"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api-prompts")), zygote=exchange_zygote)
    env.write_app("prompt_app", PROMPT_APP)
    add_roles(env, {"supervisor": ["read", "verify"]})  # the issue's: verifies doses, starts and cancels nothing
    env.cli("users", "add", "sue", "--role", "Supervisor", input_text=PASSWORD + "\n").check()
    yield from start_api_gateway(env)


def start_lab(api: ApiGateway, **params: Any) -> str:
    answer = api.call("POST", "/api/v1/runs", "engineer", json={"workflow": "api.lab", "params": params})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    wait_until(lambda: api.run(run_id)["prompt"], 20, message="the prompt to open")
    return run_id


def finished(api: ApiGateway, run_id: str) -> dict[str, Any]:
    view: dict[str, Any] = wait_until(lambda: (v := api.run(run_id))["status"] in ("SUCCESS", "ERROR") and v, 20,
                                      message="the run to finish")
    return view


def path(run_id: str, verify: bool = False) -> str:
    return f"/api/v1/runs/{run_id}/prompts/lab_result" + ("/verify" if verify else "")


def signed(user: str, **body: Any) -> dict[str, Any]:
    """A body naming the user who acts, with their password (the test users are ``ROLE-user``)."""
    return {**body, "user": user, "password": PASSWORD}


def test_a_prompt_is_listed_refused_naming_the_field_and_answered(api: ApiGateway) -> None:
    run_id = start_lab(api)
    listed = api.call("GET", "/api/v1/prompts", "viewer").json()
    mine = [p for p in listed if p["run"] == run_id]
    assert len(mine) == 1 and mine[0]["key"] == "lab_result" and mine[0]["status"] == "OPEN"
    assert mine[0]["fields"]["density"] == {"type": "float", "required": True, "min": 0.9, "max": 1.2,
                                            "unit": "g/cm3"}
    assert api.call("POST", path(run_id), "viewer", json={"values": GOOD}).status_code == 403
    for values, field in (({**GOOD, "density": 1.3}, "density"), ({**GOOD, "grade": "Z"}, "grade"),
                          ({**GOOD, "approved": "yes"}, "approved"), ({**GOOD, "colour": "red"}, "colour"),
                          ({"approved": True, "grade": "A"}, "density")):
        refused = api.call("POST", path(run_id), "operator", json={"values": values})
        assert refused.status_code == 400 and f"field {field!r}" in refused.json()["error"], refused.text
    assert api.run(run_id)["prompt"]["status"] == "OPEN"
    answered = api.call("POST", path(run_id), "operator", json={"values": GOOD, "reason": "sheet 7"})
    assert answered.status_code == 200 and answered.json()["status"] == "ANSWERED", answered.text
    view = finished(api, run_id)
    assert view["result"]["values"]["density"] == 1.02 and view["result"]["by"] == "token:operator-token"
    again = api.call("POST", path(run_id), "operator", json={"values": GOOD})
    assert again.status_code == 409, again.text
    audit = [e for e in view["events"] if e["kind"] == "prompt_answered"]
    assert audit[0]["actor"] == "token:operator-token" and audit[0]["reason"] == "sheet 7"


def test_a_second_person_verifies_and_the_one_who_answered_cannot(api: ApiGateway) -> None:
    run_id = start_lab(api, verify_role="admin")
    first = api.call("POST", path(run_id), "viewer", json=signed("engineer-user", values=GOOD))
    assert first.status_code == 202 and first.json()["status"] == "AWAITING_VERIFICATION", first.text
    assert first.json()["answered_by"] == "engineer-user"  # the user the body names, not the viewer token
    assert api.call("POST", path(run_id), "operator", json=signed("operator-user", values=GOOD)).status_code == 409
    refused = api.call("POST", path(run_id, verify=True), "admin", json=signed("engineer-user"))
    assert refused.status_code == 403, refused.text  # below admin (and the one who answered)
    assert api.run(run_id)["status"] == "RUNNING"
    verified = api.call("POST", path(run_id, verify=True), "viewer", json=signed("admin-user", reason="checked"))
    assert verified.status_code == 200 and verified.json()["status"] == "ANSWERED", verified.text
    view = finished(api, run_id)
    assert (view["result"]["by"], view["result"]["verified_by"]) == ("engineer-user", "admin-user")
    audit = [(e["kind"], e["actor"]) for e in view["events"] if e["kind"] in ("prompt_answered", "prompt_verified")]
    assert audit == [("prompt_answered", "engineer-user"), ("prompt_verified", "admin-user")]
    # The verifier's password came with the verification: it is an electronic signature.
    (signature,) = api.call("GET", f"/api/v1/runs/{run_id}/signatures", "viewer").json()
    assert (signature["user"], signature["meaning"], signature["prompt"]) == ("admin-user", "verified", "lab_result")


def test_tokens_are_not_persons_and_the_one_who_answered_cannot_verify(api: ApiGateway) -> None:
    run_id = start_lab(api, verify_role="operator")
    token = api.call("POST", path(run_id), "operator", json={"values": GOOD})
    assert token.status_code == 403 and "not a person" in token.json()["error"], token.text
    assert api.run(run_id)["prompt"]["status"] == "OPEN"
    assert api.call("POST", path(run_id), "engineer", json=signed("operator-user", values=GOOD)).status_code == 202
    for role in ("engineer", "admin"):  # another token is no second person, nor is the answerer's own
        other = api.call("POST", path(run_id, verify=True), role, json={})
        assert other.status_code == 403 and "not a person" in other.json()["error"], other.text
    same = api.call("POST", path(run_id, verify=True), "admin", json=signed("operator-user"))
    assert same.status_code == 403 and "second, different person" in same.json()["error"], same.text
    wrong = api.call("POST", path(run_id, verify=True), "admin",
                     json={"user": "admin-user", "password": "not the password"})
    assert wrong.status_code == 401 and "wrong user name or password" in wrong.json()["error"], wrong.text
    half = api.call("POST", path(run_id, verify=True), "admin", json={"user": "admin-user"})
    assert half.status_code == 400 and "password" in half.json()["error"], half.text
    assert api.run(run_id)["prompt"]["status"] == "AWAITING_VERIFICATION"
    back = api.call("POST", path(run_id, verify=True), "operator", json=signed("engineer-user", reject=True,
                                                                                reason="redo"))
    assert back.status_code == 200 and back.json()["status"] == "OPEN", back.text
    assert api.run(run_id)["prompt"]["answered_by"] is None


def test_an_engineer_prompt_refuses_an_operator(api: ApiGateway) -> None:
    run_id = start_lab(api, role="engineer")
    refused = api.call("POST", path(run_id), "operator", json={"values": GOOD})
    assert refused.status_code == 403 and "needs the engineer role" in refused.json()["error"], refused.text
    assert api.call("POST", path(run_id), "engineer", json={"values": GOOD}).status_code == 200
    assert finished(api, run_id)["status"] == "SUCCESS"


def test_a_prompt_that_is_not_there_is_a_409_and_an_unknown_run_a_404(api: ApiGateway) -> None:
    run_id = start_lab(api)
    missing = api.call("POST", f"/api/v1/runs/{run_id}/prompts/nope", "operator", json={"values": {}})
    assert missing.status_code == 409 and "does not exist" in missing.json()["error"], missing.text
    for suffix in ("", "/verify"):  # a viewer acts on no prompt: 403 before it learns whether one exists
        viewer = api.call("POST", f"/api/v1/runs/{run_id}/prompts/nope{suffix}", "viewer", json={})
        assert viewer.status_code == 403 and "viewer" in viewer.json()["error"], viewer.text
    unknown = api.call("POST", "/api/v1/runs/00000000-0000-0000-0000-000000000000/prompts/x", "operator",
                       json={"values": {}})
    assert unknown.status_code == 404, unknown.text
    api.call("POST", path(run_id), "operator", json={"values": GOOD})


def test_attention_and_metrics_count_the_open_prompt(api: ApiGateway) -> None:
    run_id = start_lab(api)
    rows = api.call("GET", "/api/v1/attention", "viewer").json()
    mine = [row for row in rows if row["run"] == run_id]
    assert [(row["reason"], row["workflow"]) for row in mine] == [("prompt", "api.lab")]
    assert mine[0]["detail"].startswith("prompt 'lab_result' waits for an answer: Enter the lab result")
    waiting = len([row for row in rows if row["reason"] == "prompt"])
    metrics = api.call("GET", "/metrics").text
    assert f'exchange_runs_needing_attention{{reason="prompt"}} {waiting}.0' in metrics, metrics
    assert 'exchange_runs_needing_attention{reason="held"} 0.0' in metrics
    api.call("POST", path(run_id), "operator", json={"values": GOOD})
    finished(api, run_id)
    assert run_id not in [row["run"] for row in api.call("GET", "/api/v1/attention", "viewer").json()]


def start_sample(api: ApiGateway, **params: Any) -> str:
    answer = api.call("POST", "/api/v1/runs", "engineer", json={"workflow": "api.sample", "params": params})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    wait_until(lambda: api.run(run_id)["prompt"], 20, message="the prompt to open")
    return run_id


def test_text_answers_refuse_blank_control_characters_and_lone_surrogates_naming_the_field(api: ApiGateway) -> None:
    run_id = start_sample(api)
    url = f"/api/v1/runs/{run_id}/prompts/sample"
    for values, words in (({"lot": "   "}, "field 'lot': a value is required (blank text is no value)"),
                          ({"lot": "\t"}, "field 'lot': a value is required (blank text is no value)"),
                          ({"lot": ""}, "field 'lot': a value is required (blank text is no value)"),
                          ({"lot": "L-1", "note": "a\ud800b"}, "field 'note': holds a lone surrogate U+D800"),
                          ({"lot": "L-1", "note": "a\x00b"}, "field 'note': holds a control character U+0000"),
                          ({"lot": "L-1\x1b[2J"}, "field 'lot': holds a control character U+001B"),
                          ({"lot": "L-1", "note": "\u202egnp.exe"},
                           "field 'note': holds a bidirectional override U+202E"),
                          ({"lot": "L-1", "no\ud800te": "x"}, "field 'no\\ud800te': is not a field of this prompt")):
        refused = api.call("POST", url, "operator", json={"values": values})
        assert refused.status_code == 400 and words in refused.json()["error"], (values, refused.text)
    assert api.run(run_id)["prompt"]["status"] == "OPEN"
    answered = api.call("POST", url, "operator", json={"values": {"lot": "L-1", "note": " \t "}})
    assert answered.status_code == 200, answered.text
    assert finished(api, run_id)["result"]["values"] == {"lot": "L-1", "note": None}  # blank optional text: None


def test_a_labelled_text_field_takes_only_what_its_pattern_matches(api: ApiGateway) -> None:
    run_id = start_sample(api, labelled=True)
    (listed,) = [p for p in api.call("GET", "/api/v1/prompts", "viewer").json() if p["run"] == run_id]
    assert listed["fields"]["lot"] == {"type": "text", "required": True, "label": "Lot number", "max_chars": 10000,
                                       "pattern": "^L-\\d{6}$"}
    url = f"/api/v1/runs/{run_id}/prompts/sample"
    for lot in ("L-12345", "L-1234567", "l-123456", "L-123456\n", "L-\u0661\u0662\u0663\u0664\u0665\u0666"):
        refused = api.call("POST", url, "operator", json={"values": {"lot": lot}})
        error = refused.json()["error"]
        assert refused.status_code == 400 and error.startswith("field 'lot' (Lot number): "), refused.text
        assert error.endswith("does not match the pattern ^L-\\d{6}$"), refused.text
    assert api.call("POST", url, "operator", json={"values": {"lot": "L-123456"}}).status_code == 200
    assert finished(api, run_id)["result"]["values"] == {"lot": "L-123456", "note": None}


def test_a_custom_role_verifies_through_the_api_and_the_console_but_starts_and_cancels_nothing(
        api: ApiGateway) -> None:
    """``[roles.supervisor] rights = ["read", "verify"]``: sue verifies an engineer-verified prompt,
    by her password in the body and in the console, where she is shown no command, cancel or start;
    starting, cancelling, commanding and answering are 403 naming the right."""
    listed = {u["name"]: u for u in api.env.cli("users", "list", "--json").check().json()}
    assert listed["sue"]["role"] == "supervisor" and listed["sue"]["rights"] == ["read", "verify"]
    session = requests.Session()
    assert console_sign_in(session, api.url, "sue").status_code == 303
    found = re.search(r'name="csrf_token" value="([^"]+)"', session.get(f"{api.url}/runs", timeout=20).text)
    assert found is not None
    csrf = found.group(1)  # the session's: the API's X-CSRF-Token and every console form's field

    def as_sue(method: str, route: str, **body: object) -> requests.Response:
        return session.request(method, api.url + route, json=body, headers={"X-CSRF-Token": csrf}, timeout=20)

    by_api, by_console = start_lab(api, verify_role="engineer"), start_lab(api, verify_role="engineer")
    refusals = [as_sue("POST", "/api/v1/runs", workflow="api.lab", params={}),
                as_sue("POST", f"/api/v1/runs/{by_api}/cancel", reason="no"),
                as_sue("POST", f"/api/v1/runs/{by_api}/commands", cmd="HOLD"),
                as_sue("POST", path(by_api), values=GOOD)]
    for answer, right in zip(refusals, ("start_free", "cancel", "command", "answer"), strict=True):
        assert answer.status_code == 403 and f"needs the right '{right}'" in answer.json()["error"], answer.text
        assert "sue has role supervisor" in answer.json()["error"], answer.text
    for run_id in (by_api, by_console):
        answered = api.call("POST", path(run_id), "viewer", json=signed("operator-user", values=GOOD))
        assert answered.status_code == 202, answered.text
    verified = api.call("POST", path(by_api, verify=True), "viewer", json=signed("sue", reason="dose checked"))
    assert verified.status_code == 200 and verified.json()["verified_by"] == "sue", verified.text

    page = session.get(f"{api.url}/runs/{by_console}", timeout=20).text
    assert "prompt-verify" in page and 'id="cancel"' not in page and 'data-cmd="HOLD"' not in page
    assert 'href="/start"' not in page and 'href="/admin"' not in page
    verify_url = f"{api.url}/runs/{by_console}/prompts/lab_result/verify"
    asked = session.post(verify_url, allow_redirects=False, data={"csrf_token": csrf, "decision": "verify"},
                         timeout=20)  # a verification is a signature: the console asks her password first
    assert asked.status_code == 200 and 'name="signature_password"' in asked.text, asked.text
    done = session.post(verify_url, allow_redirects=False, timeout=20,
                        data={"csrf_token": csrf, "decision": "verify", "signature_meaning": "verified",
                              "signature_password": PASSWORD})
    assert done.status_code == 303 and "problem" not in done.headers.get("set-cookie", ""), done.text
    assert session.post(f"{api.url}/runs/{by_console}/cancel", data={"csrf_token": csrf},
                        allow_redirects=False, timeout=20).status_code == 403
    for run_id in (by_api, by_console):
        view = finished(api, run_id)
        assert view["status"] == "SUCCESS", view
        assert view["result"]["verified_by"] == "sue", view["result"]
