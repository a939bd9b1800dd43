"""What a security campaign broke in the console, in a real headless Chromium against a real gateway:
a sign-in form posted from another site signs the browser in as nobody (login CSRF), and the
one-line notices come only from the server (a ``?notice=`` link, a made-up or another browser's
notice cookie show nothing); over plain HTTP, the admin page's role and password checks."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from playwright.sync_api import Browser, Page, expect

from tests.api.conftest import PASSWORD, ApiGateway
from tests.console.test_console_http import _session

Visit = Callable[..., Page]


class _AnotherSite:
    """A page on ``http://localhost:PORT`` (another site than the gateway's ``127.0.0.1``) with a
    form that signs whoever presses its button in as the attacker."""

    def __init__(self, console_url: str) -> None:
        form = (f'<!doctype html><form method="post" action="{console_url}/signin">'
                '<input type="hidden" name="user" value="viewer-user">'
                f'<input type="hidden" name="password" value="{html.escape(PASSWORD)}">'
                '<input type="hidden" name="next" value="/runs">'
                '<input type="hidden" name="signin_token" value="0000">'
                '<button type="submit">Win a prize</button></form>').encode()

        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(form)))
                self.end_headers()
                self.wfile.write(form)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
        self.url = f"http://localhost:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def another_site(console: ApiGateway) -> Iterator[_AnotherSite]:
    site = _AnotherSite(console.url)
    yield site
    site.close()


def test_a_sign_in_form_posted_from_another_site_signs_nobody_in(console: ApiGateway, browser: Browser,
                                                                  another_site: _AnotherSite) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(another_site.url)
        with page.expect_response(f"{console.url}/signin") as posted:
            page.get_by_role("button", name="Win a prize").click()
        assert posted.value.status == 403
        expect(page.get_by_role("alert")).to_contain_text("was sent from another site")
        assert "exchange_session" not in {cookie["name"] for cookie in context.cookies()}
        page.goto(f"{console.url}/runs")
        expect(page).to_have_url(f"{console.url}/signin?next=%2Fruns")  # signed in as nobody
        # the form the gateway itself served works in this very browser
        page.get_by_label("User").fill("operator-user")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(f"{console.url}/runs")
        expect(page.locator("form.who")).to_contain_text("operator-user")
    finally:
        context.close()
    assert "console sign-in form for 'viewer-user' from 127.0.0.1 refused" in console.gateway.log_text()


def test_a_sign_in_post_without_the_forms_token_is_refused(console: ApiGateway) -> None:
    bare = requests.post(f"{console.url}/signin", data={"user": "viewer-user", "password": PASSWORD},
                         allow_redirects=False, timeout=20)
    assert bare.status_code == 403 and "exchange_session" not in bare.headers.get("set-cookie", "")


def test_a_notice_in_the_address_is_not_shown(console: ApiGateway, visit: Visit) -> None:
    run_id = console.start(target_level=400.0)
    page = visit("operator")
    page.goto(f"{console.url}/runs?notice=STOP+sent&problem=Call+555-0100")
    expect(page.locator("h1")).to_contain_text("Runs")
    expect(page.get_by_role("status")).to_have_count(0)
    expect(page.get_by_text("Call 555-0100")).to_have_count(0)
    page.goto(f"{console.url}/runs/{run_id}?notice=STOP+sent")
    expect(page.locator("#state")).to_have_text("RUNNING")
    expect(page.get_by_text("STOP sent")).to_have_count(0)
    # the server's own notice is shown, on the page it is for, and only there
    page.get_by_label("Reason").fill("checking the notice")
    page.get_by_role("button", name="Hold").click()
    expect(page.get_by_role("status")).to_contain_text("HOLD sent (checking the notice)")
    page.goto(f"{console.url}/queues")
    expect(page.get_by_role("status")).to_have_count(0)


def test_a_notice_cookie_made_up_or_from_another_browser_shows_nothing(console: ApiGateway, visit: Visit) -> None:
    run_id = console.start(target_level=400.0)
    sender, sender_csrf = _session(console, "operator")
    answer = sender.post(f"{console.url}/runs/{run_id}/command", allow_redirects=False, timeout=20,
                         data={"cmd": "EXPLODE", "csrf_token": sender_csrf})
    stolen = answer.cookies["exchange_flash"]
    data, _, _mac = stolen.partition(".")
    page = visit("operator")
    for value in (stolen, f"{data}.{'0' * 64}"):  # another session's genuine notice; a made-up signature
        page.context.add_cookies([{"name": "exchange_flash", "value": value, "url": console.url}])
        page.goto(f"{console.url}/runs/{run_id}")
        expect(page.locator("#state")).to_have_text("RUNNING")
        expect(page.get_by_role("alert")).to_have_count(0)
    assert "EXPLODE not sent" in sender.get(f"{console.url}/runs/{run_id}", timeout=20).text  # its own browser


def test_the_admin_page_sets_roles_keeps_the_last_admin_and_refuses_weak_passwords(console: ApiGateway) -> None:
    admin, csrf = _session(console, "admin")

    def submit(**fields: str) -> str:
        answer = admin.post(f"{console.url}/admin/users", data={"csrf_token": csrf, **fields}, allow_redirects=False,
                            timeout=20)
        assert answer.status_code == 303 and answer.headers["location"] == "/admin", answer.text
        return html.unescape(admin.get(f"{console.url}/admin", timeout=20).text)

    assert "a password has 12 to 1024 characters" in submit(action="add", name="weak", role="operator",
                                                            password="password")
    assert "must not be only spaces" in submit(action="add", name="weak", role="operator", password=" " * 16)
    assert "already exists (user names are compared without case)" in submit(
        action="add", name="Viewer-User", role="admin", password="long enough pw")
    assert "is the last admin and cannot be given the role viewer" in submit(action="role", name="admin-user",
                                                                              role="viewer")
    assert "user temp-engineer added" in submit(action="add", name="temp-engineer", role="engineer",
                                                password="long enough pw")
    page = submit(action="role", name="temp-engineer", role="viewer")
    assert "temp-engineer has the role viewer now, in their open sessions too" in page
    roles = {u["name"]: u["role"] for u in console.env.cli("users", "list", "--json").check().json()}
    assert roles["admin-user"] == "admin" and roles["temp-engineer"] == "viewer" and "weak" not in roles
    assert "Viewer-User" not in roles
