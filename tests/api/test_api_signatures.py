"""Electronic signatures through the HTTP API of a real gateway whose config lists STOP in
``[signatures] required_for`` and gives QA a custom role with ``sign`` and ``release``: an unsigned
STOP refused (403 naming the signature, nothing sent), an API token refused as a signer, a wrong
password 401 and then throttled (429), the signed STOP kept with its signature; QA signs and
releases with the password in the body, once; the review lists the run until it is released."""

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


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api-signatures")), zygote=exchange_zygote)
    add_roles(env, {"qa": ["read", "sign", "release"]})
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write('\n[signatures]\nrequired_for = ["STOP"]\n')
    env.cli("users", "add", "quinn", "--role", "qa", input_text=PASSWORD + "\n").check()
    yield from start_api_gateway(env)


class Session:
    """A console session of ``user``: its cookie, and its CSRF token on every unsafe request."""

    def __init__(self, api: ApiGateway, user: str) -> None:
        self.api, self.session = api, requests.Session()
        assert console_sign_in(self.session, api.url, user).status_code == 303
        found = re.search(r'name="csrf_token" value="([^"]+)"', self.session.get(f"{api.url}/runs", timeout=20).text)
        assert found is not None
        self.csrf = found.group(1)

    def post(self, route: str, **body: Any) -> requests.Response:
        return self.session.post(self.api.url + route, json=body, headers={"X-CSRF-Token": self.csrf}, timeout=20)


def test_a_required_stop_and_qa_s_signature_and_release_need_the_signer_s_password(api: ApiGateway) -> None:
    run_id = api.start(target_level=1000.0)
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="the run to run")
    stop = f"/api/v1/runs/{run_id}/commands"
    refused = api.call("POST", stop, "operator", json={"cmd": "STOP", "reason": "leak"})
    assert refused.status_code == 403 and "STOP of run" in refused.json()["error"], refused.text
    assert "needs an electronic signature" in refused.json()["error"]
    token = api.call("POST", stop, "operator", json={"cmd": "STOP", "signature": {"password": PASSWORD}})
    assert token.status_code == 403 and "not a person" in token.json()["error"], token.text
    olga = Session(api, "operator-user")
    wrong = olga.post(stop, cmd="STOP", signature={"password": "not the password"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "wrong user name or password", wrong.text
    assert not [e for e in api.run(run_id)["events"] if e["kind"] == "command_sent"]
    signed = olga.post(stop, cmd="stop", reason="leak", signature={"password": PASSWORD, "meaning": "leak: stop"})
    assert signed.status_code == 202, signed.text
    wait_until(lambda: api.run(run_id)["status"] == "SUCCESS", 20, message="the run to stop")

    quinn = Session(api, "quinn")
    assert quinn.post(f"/api/v1/runs/{run_id}/signatures", password=PASSWORD).status_code == 400  # no meaning
    no_right = api.call("POST", f"/api/v1/runs/{run_id}/signatures", "viewer",
                        json={"password": PASSWORD, "meaning": "reviewed"})  # refused before any password
    assert no_right.status_code == 403 and "right 'sign'" in no_right.json()["error"], no_right.text
    assert api.call("GET", "/api/v1/review", "viewer").json()[0]["run"] == run_id
    done = quinn.post(f"/api/v1/runs/{run_id}/signatures", password=PASSWORD, meaning="reviewed")
    assert done.status_code == 201 and done.json()["meaning"] == "reviewed", done.text
    released = quinn.post(f"/api/v1/runs/{run_id}/release", password=PASSWORD)
    assert released.status_code == 201 and released.json()["meaning"] == "released", released.text
    again = quinn.post(f"/api/v1/runs/{run_id}/release", password=PASSWORD)
    assert again.status_code == 409 and "released already" in again.json()["error"], again.text
    listed = api.call("GET", f"/api/v1/runs/{run_id}/signatures", "viewer").json()
    assert [(s["user"], s["action"], s["meaning"]) for s in listed] == [
        ("operator-user", "STOP", "leak: stop"), ("quinn", "sign", "reviewed"), ("quinn", "release", "released")]
    record = api.call("GET", f"/api/v1/runs/{run_id}/record", "viewer").json()
    assert record["signatures"] == listed and all(len(s["record_hash"]) == 64 for s in listed)
    assert api.call("GET", "/api/v1/review", "viewer").json() == []

    # A wrong password counts as a failed sign-in: after the free ones, the name waits (429).
    codes = [quinn.post(f"/api/v1/runs/{run_id}/signatures", password="guess", meaning="x").status_code
             for _ in range(7)]
    assert codes[0] == 401 and codes[-1] == 429, codes
    assert len(api.call("GET", f"/api/v1/runs/{run_id}/signatures", "viewer").json()) == 3
