"""The console's pages over plain HTTP against a real gateway: sign-in redirects, the session
cookie's flags, CSRF on every form, roles, bad forms, escaping of what workflows and users typed."""

from __future__ import annotations

import re

import requests

from tests.api.conftest import ApiGateway, console_sign_in


def _session(console: ApiGateway, role: str) -> tuple[requests.Session, str]:
    """A signed-in browser-like session and the CSRF token its pages carry."""
    session = requests.Session()
    answer = console_sign_in(session, console.url, f"{role}-user", next="/queues")
    assert answer.status_code == 303 and answer.headers["location"] == "/queues", answer.text
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    page = session.get(f"{console.url}/queues", timeout=20)
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found, page.text
    return session, found.group(1)


def test_pages_need_a_session_and_come_back_after_sign_in(console: ApiGateway) -> None:
    for path in ("/", "/runs", "/runs/0000", "/start", "/queues", "/admin", "/templates/x", "/start/api.batch"):
        answer = requests.get(console.url + path, allow_redirects=False, timeout=20)
        assert answer.status_code == 303, (path, answer.status_code)
        assert answer.headers["location"].startswith("/signin?next="), path
    with_token = requests.get(f"{console.url}/runs", allow_redirects=False, timeout=20,
                              headers={"Authorization": f"Bearer {console.tokens['admin']}"})
    assert with_token.status_code == 303  # tokens are for programs; pages take the session only
    page = requests.get(f"{console.url}/signin", timeout=20)
    assert page.status_code == 200 and page.headers["content-security-policy"].startswith("default-src 'self'")
    scripts = re.findall(r"<script[^>]*>", page.text)
    assert scripts == ['<script src="/static/console.js" defer>']  # no inline script: the CSP forbids them
    for asset in ("/static/console.js", "/static/console.css", "/static/favicon.svg"):
        assert requests.get(console.url + asset, timeout=20).status_code == 200, asset


def test_sign_in_never_sends_anyone_to_another_site(console: ApiGateway) -> None:
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        answer = console_sign_in(requests.Session(), console.url, "viewer-user", next=target)
        assert answer.status_code == 303 and answer.headers["location"] == "/runs", target


def test_every_form_needs_the_csrf_token_and_nothing_happens_without_it(console: ApiGateway) -> None:
    run_id = console.start(target_level=500.0)
    session, csrf = _session(console, "admin")
    forms = [
        (f"/runs/{run_id}/command", {"cmd": "HOLD", "reason": "csrf"}),
        (f"/runs/{run_id}/cancel", {"reason": "csrf"}),
        ("/start/api.batch", {"action": "start", "param.target_level": "1"}),
        ("/start/template", {"template": "x"}),
        ("/admin/users", {"name": "mallory", "role": "admin", "password": "long enough pw"}),
        ("/admin/users/viewer-user/remove", {}),
        ("/signout", {}),
    ]
    for path, fields in forms:
        for token in (None, "0" * 43, csrf[:-1]):
            data = dict(fields) if token is None else {**fields, "csrf_token": token}
            answer = session.post(console.url + path, data=data, allow_redirects=False, timeout=20)
            assert answer.status_code == 403 and "CSRF" in answer.text, (path, token, answer.status_code)
    run = console.run(run_id)
    assert not [e for e in run["events"] if e["kind"] in ("command_sent", "cancel")] and not run["cancel_requested"]
    admin_page = session.get(f"{console.url}/admin", allow_redirects=False, timeout=20)
    assert admin_page.status_code == 200  # still signed in: the sign-out form was refused too
    assert "mallory" not in admin_page.text and "viewer-user" in admin_page.text


def test_roles_and_bad_forms_are_refused_with_a_page_naming_why(console: ApiGateway) -> None:
    run_id = console.start(target_level=500.0)
    viewer, viewer_csrf = _session(console, "viewer")
    refused = viewer.post(f"{console.url}/runs/{run_id}/command", allow_redirects=False, timeout=20,
                          data={"cmd": "HOLD", "csrf_token": viewer_csrf})
    assert refused.status_code == 403 and "viewer" in refused.text and "operator" in refused.text
    operator, operator_csrf = _session(console, "operator")
    for path in ("/admin", "/start/api.batch"):
        assert operator.get(console.url + path, timeout=20).status_code == 403, path
    cancel = operator.post(f"{console.url}/runs/{run_id}/cancel", allow_redirects=False, timeout=20,
                           data={"csrf_token": operator_csrf})
    assert cancel.status_code == 403 and "engineer" in cancel.text
    as_json = operator.post(f"{console.url}/runs/{run_id}/command", json={"cmd": "HOLD"}, timeout=20,
                            allow_redirects=False)
    assert as_json.status_code == 415 and "x-www-form-urlencoded" in as_json.text
    unknown = operator.post(f"{console.url}/runs/{run_id}/command", allow_redirects=False, timeout=20,
                            data={"cmd": "EXPLODE", "csrf_token": operator_csrf})
    assert unknown.status_code == 303 and unknown.headers["location"] == f"/runs/{run_id}"  # nothing in the address
    shown = operator.get(console.url + unknown.headers["location"], timeout=20).text
    assert re.search(r'role="alert">EXPLODE not sent: [^<]*EXPLODE', shown), shown  # the server's own words
    assert "EXPLODE not sent" not in operator.get(f"{console.url}/runs", timeout=20).text  # for that page only
    assert operator.get(f"{console.url}/runs/ffffffff", timeout=20).status_code == 404
    run = console.run(run_id)
    assert not [e for e in run["events"] if e["kind"] == "command_sent"]


def test_what_workflows_and_people_typed_is_shown_escaped(console: ApiGateway) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    answer = console.call("POST", "/api/v1/runs", "engineer",
                          json={"workflow": "api.batch", "params": {"target_level": 1.0, "line": hostile}})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["id"]
    session, csrf = _session(console, "operator")
    session.post(f"{console.url}/runs/{run_id}/command", allow_redirects=False, timeout=20,
                 data={"cmd": "STOP", "reason": hostile, "csrf_token": csrf})
    page = session.get(f"{console.url}/runs/{run_id}", timeout=20).text
    assert hostile not in page and "&lt;script&gt;" in page
    runs = session.get(f"{console.url}/runs", timeout=20).text
    assert "<script>alert" not in runs
