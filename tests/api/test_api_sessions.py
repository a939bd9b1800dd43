"""Console sessions against a real gateway: sign in with a password, the cookie's flags, CSRF on every
change, sign out, a removed or demoted user's session, and the sign-in throttle (per user and address)."""

from __future__ import annotations

import requests

from tests.api.conftest import PASSWORD, ApiGateway
from tests.harness import wait_until


def _sign_in(api: ApiGateway, user: str, password: str = PASSWORD) -> tuple[requests.Session, requests.Response]:
    session = requests.Session()
    answer = session.post(f"{api.url}/api/v1/session", json={"user": user, "password": password}, timeout=20)
    return session, answer


def test_a_signed_in_operator_needs_the_csrf_token_to_change_anything(api: ApiGateway) -> None:
    run_id = api.start()
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING")
    browser, answer = _sign_in(api, "operator-user")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["user"] == "operator-user" and body["role"] == "operator" and len(body["csrf_token"]) >= 32
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert browser.get(f"{api.url}/api/v1/session", timeout=20).json()["actor"] == "operator-user"
    url = f"{api.url}/api/v1/runs/{run_id}/commands"
    refused = browser.post(url, json={"cmd": "HOLD"}, timeout=20)
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    forged = browser.post(url, json={"cmd": "HOLD"}, headers={"X-CSRF-Token": "x" * 43}, timeout=20)
    assert forged.status_code == 403
    assert api.run(run_id)["state"] == "RUNNING"  # nothing was sent
    sent = browser.post(url, json={"cmd": "HOLD", "reason": "from the console"},
                        headers={"X-CSRF-Token": body["csrf_token"]}, timeout=20)
    assert sent.status_code == 202, sent.text
    wait_until(lambda: api.run(run_id)["state"] == "HELD", 20, message="HELD")
    assert any(e["kind"] == "command_sent" and e["actor"] == "operator-user" and e["reason"] == "from the console"
               for e in api.run(run_id)["events"])
    out = browser.delete(f"{api.url}/api/v1/session", headers={"X-CSRF-Token": body["csrf_token"]}, timeout=20)
    assert out.status_code == 204
    stale = requests.get(f"{api.url}/api/v1/runs", cookies={"exchange_session": answer.cookies["exchange_session"]},
                         timeout=20)
    assert stale.status_code == 401  # the session ended in the store, not only in this browser


def test_a_removed_user_is_signed_out_at_once(api: ApiGateway) -> None:
    api.env.cli("users", "add", "temp-user", "--role", "viewer", input_text=PASSWORD + "\n").check()
    browser, answer = _sign_in(api, "temp-user")
    assert answer.status_code == 200
    assert browser.get(f"{api.url}/api/v1/runs", timeout=20).status_code == 200
    api.env.cli("users", "remove", "temp-user").check()
    assert browser.get(f"{api.url}/api/v1/runs", timeout=20).status_code == 401


def test_a_revoked_token_stops_working_at_once(api: ApiGateway) -> None:
    token = api.env.cli("tokens", "create", "short-lived", "--role", "viewer").check().stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    assert api.call("GET", "/api/v1/runs", headers=headers).status_code == 200
    assert "1 token(s) revoked" in api.env.cli("tokens", "revoke", "short-lived").check().stdout
    assert api.call("GET", "/api/v1/runs", headers=headers).status_code == 401


def test_wrong_passwords_are_refused_alike_then_rate_limited(api: ApiGateway) -> None:
    for user, password in (("operator-user", "wrong password"), ("nobody-here", PASSWORD)):
        _, answer = _sign_in(api, user, password)
        assert answer.status_code == 401 and answer.json()["error"] == "wrong user name or password"
        assert "set-cookie" not in answer.headers
    statuses = [_sign_in(api, "operator-user", f"guess {n}")[1] for n in range(5)]
    assert [a.status_code for a in statuses[:4]] == [401, 401, 401, 401]  # five failures in all: free
    limited = statuses[4]
    assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 5
    assert "too many failed sign-ins" in limited.json()["error"]
    _, right = _sign_in(api, "operator-user")  # even the right password waits, at this address ...
    assert right.status_code == 429
    assert _sign_in(api, "viewer-user")[1].status_code == 200  # ... for this name only
    # ... and for seconds, not minutes: then the right password works (and clears the count)
    wait_until(lambda: _sign_in(api, "operator-user")[1].status_code == 200, 20, interval_s=0.5,
               message="the right password after the wait")
    assert _sign_in(api, "operator-user", "one more typo")[1].status_code == 401


def test_a_demoted_user_loses_the_rights_at_once(api: ApiGateway) -> None:
    run_id = api.start()
    api.env.cli("users", "add", "demoted-user", "--role", "operator", input_text=PASSWORD + "\n").check()
    browser, answer = _sign_in(api, "demoted-user")
    csrf = {"X-CSRF-Token": answer.json()["csrf_token"]}
    api.env.cli("users", "role", "demoted-user", "--role", "viewer").check()
    assert browser.get(f"{api.url}/api/v1/session", timeout=20).json()["role"] == "viewer"
    refused = browser.post(f"{api.url}/api/v1/runs/{run_id}/commands", json={"cmd": "STOP"}, headers=csrf, timeout=20)
    assert refused.status_code == 403 and "role viewer" in refused.json()["error"]
    assert not [e for e in api.run(run_id)["events"] if e["kind"] == "command_sent"]
    api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "STOP"})
