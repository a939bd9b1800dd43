"""A real gateway process serving the HTTP API on a free port, with a user and a token per role made
by the real ``exchange users`` / ``exchange tokens`` commands."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from exchange._auth.roles import ROLES
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, toml_value, wait_until

APP = '''
from exchange.errors import StopRequested
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control


@workflow(name="api.batch", description="fills to a level, HOLD/RESUME/STOP/ABORT")
def batch(target_level=40.0, line=1):
    rt = getWorkflows()
    rt.setState("RUNNING")
    level = 0.0
    try:
        while True:
            control.checkpoint(wait_ms=100)
            if level < target_level:
                level += 1.0
                rt.progress("filling", {"level": level})
    except StopRequested as stop:  # an ABORT too (AbortRequested)
        rt.setState("ABORTED" if stop.command["cmd"] == "ABORT" else "STOPPED")
        return {"level": level}
'''

PASSWORD = "correct horse battery"
_LISTENING = re.compile(r"gateway API listening on (\S+)")


@dataclass
class ApiGateway:
    env: ExchangeEnv
    gateway: Gateway
    url: str
    tokens: dict[str, str]  # role -> token

    def call(self, method: str, path: str, role: str | None = None, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        if role is not None:
            headers["Authorization"] = f"Bearer {self.tokens[role]}"
        return requests.request(method, self.url + path, headers=headers, timeout=20, **kwargs)

    def start(self, role: str = "engineer", **params: Any) -> str:
        answer = self.call("POST", "/api/v1/runs", role, json={"workflow": "api.batch", "params": params})
        assert answer.status_code == 201, answer.text
        run_id: str = answer.json()["id"]
        return run_id

    def run(self, run_id: str) -> dict[str, Any]:
        answer = self.call("GET", f"/api/v1/runs/{run_id}", "viewer")
        assert answer.status_code == 200, answer.text
        view: dict[str, Any] = answer.json()
        return view


def console_sign_in(session: requests.Session, url: str, user: str, password: str = PASSWORD,
                    **fields: str) -> requests.Response:
    """Sign ``session`` in through the console's form, as a browser does: the sign-in page first
    (its cookie and the form's token), then the form; the answer is not followed (303 when signed in)."""
    page = session.get(f"{url}/signin", timeout=20)
    found = re.search(r'name="signin_token" value="([^"]+)"', page.text)
    assert page.status_code == 200 and found, page.text
    return session.post(f"{url}/signin", data={"user": user, "password": password, "signin_token": found.group(1),
                                               **fields}, allow_redirects=False, timeout=20)


def add_roles(env: ExchangeEnv, roles: dict[str, list[str]]) -> None:
    """Give the env's config ``[roles.NAME] rights = [...]`` tables (before its processes start)."""
    tables = "".join(f"\n[roles.{name}]\nrights = {toml_value(rights)}\n" for name, rights in roles.items())
    env.config_path.write_text(env.config_path.read_text(encoding="utf-8") + tables, encoding="utf-8")


def start_api_gateway(env: ExchangeEnv, log_level: str = "INFO") -> Iterator[ApiGateway]:
    env.write_app("api_app", APP)
    tokens: dict[str, str] = {}
    for role in ROLES:
        env.cli("users", "add", f"{role}-user", "--role", role, input_text=PASSWORD + "\n").check()
        tokens[role] = env.cli("tokens", "create", f"{role}-token", "--role", role).check().stdout.strip()
    with env.gateway("--api", "127.0.0.1:0", log_level=log_level) as gateway:
        gateway.start()
        found: list[str] = []

        def listening() -> bool:
            found[:] = _LISTENING.findall(gateway.log_text())
            return bool(found)

        wait_until(listening, 20, message=lambda: f"the API's address\n{gateway.log_text()}")
        yield ApiGateway(env=env, gateway=gateway, url=found[0], tokens=tokens)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    """One gateway with the API on SQLite, shared by a module's tests."""
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api")), zygote=exchange_zygote)
    yield from start_api_gateway(env)
