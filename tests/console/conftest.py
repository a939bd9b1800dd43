"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright) against a real
gateway process serving it, with a user per role made by the real ``exchange users`` command."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, Response, sync_playwright

from tests.api.conftest import PASSWORD, ApiGateway, start_api_gateway
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PANEL_PC = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    """One gateway serving the API and the console on SQLite, shared by a module's tests."""
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("console")), zygote=exchange_zygote)
    yield from start_api_gateway(env)


# Module scope: Playwright's sync API keeps an event loop running on the main thread while it is open,
# and a later module on the same pytest worker that calls asyncio.run() would be refused.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    yield chromium
    chromium.close()


class Visit:
    """Opens signed-in pages and remembers every request they made and every console error."""

    def __init__(self, browser: Browser, console: ApiGateway) -> None:
        self.browser = browser
        self.console = console
        self.contexts: list[BrowserContext] = []
        self.requested: list[str] = []
        self.errors: list[str] = []

    def page(self, role: str | None, *, viewport: dict[str, int] | None = None) -> Page:
        context = self.browser.new_context(viewport=viewport or PANEL_PC)  # type: ignore[arg-type]
        self.contexts.append(context)
        page = context.new_page()
        page.on("request", lambda request: self.requested.append(request.url))
        page.on("console", self._console_message)
        page.on("response", self._response)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(20_000)
        if role is not None:
            page.goto(self.console.url + "/signin")
            page.get_by_label("User").fill(f"{role}-user")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/runs")
        return page

    def _console_message(self, message: ConsoleMessage) -> None:
        # a page answered with 401/404 on purpose is logged as a failed load: responses are checked below
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    def _response(self, response: Response) -> None:
        if response.status >= 400 and response.request.resource_type != "document":
            self.errors.append(f"{response.status} for {response.request.resource_type} {response.url}")

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def visit(browser: Browser, console: ApiGateway) -> Iterator[Callable[..., Page]]:
    """``visit(role)``: a page of a fresh browser context signed in as ``role``'s user (None: not
    signed in). After the test: no request left the gateway, and no script or CSP error happened."""
    visits = Visit(browser, console)
    yield visits.page
    visits.close()
    outside = [url for url in visits.requested if not url.startswith(console.url)]
    assert not outside, f"the console asked for something outside the gateway: {outside}"
    assert not visits.errors, f"errors in the browser: {visits.errors}"


def screenshot(page: Page, name: str) -> None:
    """Save the page as ``name``.png: under docs/screenshots/ (kept in the repository, looked at by
    people) with EXCHANGE_UPDATE_SCREENSHOTS=1, else in the temporary directory, so an ordinary
    test run leaves the checkout as it was."""
    folder = SCREENSHOTS if os.environ.get("EXCHANGE_UPDATE_SCREENSHOTS") == "1" else (
        Path(tempfile.gettempdir()) / "exchange-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
