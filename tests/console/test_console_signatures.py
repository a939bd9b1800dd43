"""Electronic signatures in the console, in a real browser against a real gateway whose config lists
STOP in ``[signatures] required_for`` and gives QA a custom role (read, sign, release): the Stop
button asks the operator's password before anything is sent (a wrong one sends nothing); QA finds
the run on the review page, signs its record and releases it through the signing dialog (a wrong
password signs nothing), the record marks each signature's hash (and marks it changed once the
database is edited behind Exchange's back), and the run leaves the pending review list.
Screenshots of the review page and of the signing dialog."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from exchange._api.console.routes_record import _checks
from tests.api.conftest import PASSWORD, ApiGateway, add_roles, start_api_gateway
from tests.console.conftest import Visit, screenshot
from tests.console.test_console_http import _session
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("console-signatures")), zygote=exchange_zygote)
    add_roles(env, {"qa": ["read", "sign", "release"]})
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write('\n[signatures]\nrequired_for = ["STOP", "cancel"]\n')
    env.cli("users", "add", "qa-user", "--role", "qa", "--full-name", "Quinn Archer",
            input_text=PASSWORD + "\n").check()
    yield from start_api_gateway(env)


def _signatures(console: ApiGateway, run_id: str) -> list[tuple[str, str, str]]:
    listed = console.call("GET", f"/api/v1/runs/{run_id}/signatures", "viewer").json()
    return [(s["user"], s["action"], s["meaning"]) for s in listed]


def _sign(page: Page, password: str) -> None:
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign", exact=True).click()


def test_a_signed_stop_then_qa_signs_and_releases_the_record(console: ApiGateway, visit: Visit) -> None:
    run_id = console.start(target_level=1000.0)
    wait_until(lambda: console.run(run_id)["state"] == "RUNNING", 20, message="the run to run")

    operator = visit("operator")
    operator.goto(f"{console.url}/runs/{run_id}")
    expect(operator.get_by_role("link", name="Review")).to_have_count(0)  # neither sign nor release
    stop = operator.get_by_role("button", name="Stop")
    expect(stop).to_have_attribute("title", "needs your electronic signature (your password)")
    expect(stop).to_be_enabled()
    operator.get_by_label("Reason").fill("leak at valve 3")
    stop.click()
    expect(operator.get_by_role("heading", name=f"Sign STOP of run {run_id[:8]}")).to_be_visible()
    expect(operator.get_by_label("Meaning")).to_have_value("ordered STOP")  # the action's default
    _sign(operator, "not the password")
    expect(operator.get_by_role("alert")).to_have_text("wrong password: nothing signed")
    assert not [e for e in console.run(run_id)["events"] if e["kind"] == "command_sent"]
    expect(operator.get_by_label("Meaning")).to_have_value("ordered STOP")
    _sign(operator, PASSWORD)
    expect(operator.get_by_role("status")).to_contain_text("STOP sent (leak at valve 3)")
    wait_until(lambda: console.run(run_id)["status"] == "SUCCESS", 20, message="the run to stop")
    assert _signatures(console, run_id) == [("operator-user", "STOP", "ordered STOP")]

    qa = visit("qa")
    qa.get_by_role("link", name="Review").click()
    row = qa.locator(f"#review tr[data-run='{run_id}']")
    expect(row).to_contain_text("command ×1")  # the STOP, an exception to review
    screenshot(qa, "review")
    row.get_by_role("link").click()
    expect(qa).to_have_url(f"{console.url}/runs/{run_id}/record")
    expect(qa.locator(".signing-actions")).to_contain_text("Not released yet.")
    qa.get_by_role("link", name="Sign…").click()
    expect(qa.get_by_text("Electronic signature of Quinn Archer (user qa-user)")).to_be_visible()
    qa.get_by_label("Meaning").fill("reviewed: the STOP was the operator's")
    screenshot(qa, "signing-dialog")
    _sign(qa, "a guess")
    expect(qa.get_by_role("alert")).to_have_text("wrong password: nothing signed")
    expect(qa.get_by_label("Meaning")).to_have_value("reviewed: the STOP was the operator's")  # kept as typed
    assert len(_signatures(console, run_id)) == 1
    _sign(qa, PASSWORD)
    expect(qa.get_by_role("status")).to_have_text("signed the record: reviewed: the STOP was the operator's")
    signed = qa.locator("#record-signatures tbody tr")
    expect(signed).to_have_count(2)
    expect(signed.nth(0)).to_contain_text("signed with its action")  # the STOP's: hashed before the STOP
    expect(signed.nth(1)).to_contain_text("Quinn Archer")
    expect(signed.nth(1).locator(".check")).to_have_text("hash matches")

    qa.get_by_role("link", name="Release…").click()
    expect(qa.get_by_label("Meaning")).to_have_value("released")
    expect(qa.get_by_label("Meaning")).not_to_be_editable()
    _sign(qa, PASSWORD)
    expect(qa.get_by_role("status")).to_have_text(f"released run {run_id[:8]}")
    expect(qa.locator(".signing-actions")).to_contain_text("Released by Quinn Archer")
    expect(qa.get_by_role("link", name="Release…")).to_have_count(0)
    expect(qa.locator("#record-signatures .check")).to_have_text(
        ["signed with its action", "hash matches", "hash matches"])
    assert _signatures(console, run_id) == [("operator-user", "STOP", "ordered STOP"),
                                            ("qa-user", "sign", "reviewed: the STOP was the operator's"),
                                            ("qa-user", "release", "released")]

    qa.get_by_role("link", name="Review").click()
    expect(qa.locator(f"#review tr[data-run='{run_id}']")).to_have_count(0)  # released: no longer pending
    qa.get_by_role("link", name="Every finished run").click()
    expect(qa.locator(f"#review tr[data-run='{run_id}'] .released")).to_contain_text("Quinn Archer (qa-user)")

    # The STOP's reason changed straight in the database: the record is no longer the one QA signed.
    database = console.env.sqlite_path
    assert database is not None
    with closing(sqlite3.connect(database)) as conn, conn:
        changed = conn.execute("UPDATE exchange_events SET reason = 'routine' WHERE run_id = ? "
                               "AND kind IN ('command_sent', 'command')", (run_id,)).rowcount
    assert changed >= 1
    qa.goto(f"{console.url}/runs/{run_id}/record")
    expect(qa.locator("#record-signatures .check")).to_have_text(
        ["signed with its action", "changed: the record is no longer the one signed",
         "changed: the record is no longer the one signed"])


def test_a_required_cancel_sends_nothing_before_the_password(console: ApiGateway) -> None:
    run_id = console.start(target_level=1000.0)
    session, csrf = _session(console, "engineer")
    cancel = f"{console.url}/runs/{run_id}/cancel"
    asked = session.post(cancel, data={"csrf_token": csrf, "reason": "wrong lot"}, allow_redirects=False, timeout=20)
    assert asked.status_code == 200 and "Sign the cancel of run" in asked.text, asked.text
    assert 'name="reason" value="wrong lot"' in asked.text and 'value="cancelled"' in asked.text  # carried, default
    wrong = session.post(cancel, data={"csrf_token": csrf, "reason": "wrong lot", "signature_meaning": "cancelled",
                                       "signature_password": "guess"}, allow_redirects=False, timeout=20)
    assert wrong.status_code == 401 and "wrong password: nothing signed" in wrong.text, wrong.text
    assert "guess" not in wrong.text  # a password is never sent back
    assert console.run(run_id)["status"] in ("ENQUEUED", "PENDING", "RUNNING")
    done = session.post(cancel, data={"csrf_token": csrf, "reason": "wrong lot", "signature_meaning": "cancelled",
                                      "signature_password": PASSWORD}, allow_redirects=False, timeout=20)
    assert done.status_code == 303, done.text
    wait_until(lambda: console.run(run_id)["status"] == "CANCELLED", 20, message="the run to be cancelled")
    assert _signatures(console, run_id) == [("engineer-user", "cancel", "cancelled")]
    unsigned = session.post(f"{console.url}/runs/{run_id}/sign", data={"csrf_token": csrf, "signature_meaning": "ok"},
                            allow_redirects=False, timeout=20)  # no password: the dialog again, nothing signed
    assert unsigned.status_code == 200 and len(_signatures(console, run_id)) == 1
    assert session.get(f"{console.url}/runs/{run_id}/release", timeout=20).status_code == 403  # engineers sign


class _Checked:
    """A runtime whose ``signature_checks`` says the sign and the release no longer match."""

    def signature_checks(self, run_id: str) -> list[bool | None]:
        return [False, False, None]


def test_the_record_rechecks_only_signatures_made_once_the_run_had_finished() -> None:
    runtime: Any = _Checked()
    signatures = [{"action": "sign", "at": "2026-11-28T10:00:00.000+00:00"},  # the run went on after it
                  {"action": "release", "at": "2026-11-28T11:00:00.000+00:00"},
                  {"action": "STOP", "at": "2026-11-28T09:00:00.000+00:00"}]
    found = {"run": {"id": "r", "finished_at": "2026-11-28T10:30:00.000+00:00"}, "signatures": signatures}
    assert _checks(runtime, found) == [None, False, None]
    assert _checks(runtime, {"run": {"id": "r", "finished_at": None}, "signatures": signatures}) == [
        None, None, None]
    assert _checks(runtime, {"run": {"id": "r", "finished_at": None}, "signatures": []}) == []
