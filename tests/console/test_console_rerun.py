"""The Retry and Fork buttons of a failed run's page, in a real browser against a real gateway:
engineers only, with the Reason field, audited; a screenshot of the failed run's page."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.api.conftest import ApiGateway, start_api_gateway
from tests.api.test_api_rerun import RERUN_APP
from tests.console.conftest import screenshot
from tests.console.test_console_http import _session
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, read_lines, wait_until

Visit = Callable[..., Page]


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("console-rerun")), zygote=exchange_zygote)
    env.write_app("rerun_app", RERUN_APP)
    yield from start_api_gateway(env)


def _failed_run(console: ApiGateway, tmp_path: Path) -> tuple[str, Path, Path]:
    side, flag = tmp_path / "side.txt", tmp_path / "mes-is-back"
    answer = console.call("POST", "/api/v1/runs", "engineer",
                          json={"workflow": "apirerun.batch", "params": {"path": str(side), "flag": str(flag)}})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    wait_until(lambda: console.run(run_id)["status"] == "ERROR", 20, message="the run to fail")
    return run_id, side, flag


def test_an_engineer_retries_a_failed_run_with_a_reason(console: ApiGateway, visit: Visit, tmp_path: Path) -> None:
    run_id, side, flag = _failed_run(console, tmp_path)
    operator = visit("operator")
    operator.goto(f"{console.url}/runs/{run_id}")
    expect(operator.locator("#status")).to_have_text("ERROR")
    expect(operator.get_by_role("button", name="Retry")).to_have_count(0)  # engineers only
    expect(operator.get_by_role("button", name="Fork")).to_have_count(0)

    page = visit("engineer")
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.get_by_label("From step")).to_have_value("2")  # the failed step
    page.get_by_label("Reason").fill("MES is back")
    screenshot(page, "run-retry")
    flag.touch()
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_contain_text("retry queued")
    expect(page.locator("#status")).to_have_text("SUCCESS")  # followed live, the page reloads at the end
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)  # a succeeded run has nothing to retry
    audit = page.locator("table.audit")
    expect(audit).to_contain_text("MES is back")
    expect(audit).to_contain_text("engineer-user")
    expect(audit).to_contain_text("ERROR run executed again from step 2 (apirerun.post)")
    assert [line[0] for line in read_lines(side)] == ["a", "post", "post", "c"]
    view = console.run(run_id)
    (event,) = [e for e in view["events"] if e["kind"] == "retried"]
    assert (event["actor"], event["reason"]) == ("engineer-user", "MES is back")


def test_an_engineer_forks_a_run_from_a_step(console: ApiGateway, visit: Visit, tmp_path: Path) -> None:
    run_id, side, flag = _failed_run(console, tmp_path)
    flag.touch()
    page = visit("engineer")
    page.goto(f"{console.url}/runs/{run_id}")
    page.get_by_label("Reason").fill("post it in a new run")
    page.get_by_label("From step").fill("9")
    page.get_by_role("button", name="Fork").click()  # the browser keeps the form: 3 is the last position
    assert page.get_by_label("From step").evaluate("field => field.validity.rangeOverflow") is True
    expect(page).to_have_url(f"{console.url}/runs/{run_id}")
    page.get_by_label("From step").fill("2")
    page.get_by_role("button", name="Fork").click()
    expect(page.get_by_role("status")).to_contain_text(f"forked from step 2 of run {run_id[:8]}")
    expect(page.locator("#status")).to_have_text("SUCCESS")
    forked = page.locator("#run").get_attribute("data-run-id")
    assert forked is not None and forked != run_id
    assert console.run(forked)["forked_from"] == run_id
    assert [line[0] for line in read_lines(side)] == ["a", "post", "post", "c"]
    assert console.run(run_id)["status"] == "ERROR"


def test_the_retry_and_fork_forms_need_the_csrf_token_an_engineer_and_a_whole_step(console: ApiGateway,
                                                                                    tmp_path: Path) -> None:
    run_id, _side, _flag = _failed_run(console, tmp_path)
    admin, csrf = _session(console, "admin")
    for path, fields in ((f"/runs/{run_id}/retry", {"reason": "csrf"}), (f"/runs/{run_id}/fork", {"from_step": "1"})):
        answer = admin.post(console.url + path, data=fields, allow_redirects=False, timeout=20)
        assert answer.status_code == 403 and "CSRF" in answer.text, path
    operator, operator_csrf = _session(console, "operator")
    refused = operator.post(f"{console.url}/runs/{run_id}/retry", data={"csrf_token": operator_csrf},
                            allow_redirects=False, timeout=20)
    assert refused.status_code == 403 and "retrying a run needs the right &#39;rerun&#39;" in refused.text
    for text, problem in (("abc", "From step must be a whole number >= 1, got 'abc'"),
                          ("7", "from_step 7 is outside 1..3")):
        answer = admin.post(f"{console.url}/runs/{run_id}/fork", data={"csrf_token": csrf, "from_step": text},
                            allow_redirects=False, timeout=20)
        assert answer.status_code == 303 and answer.headers["location"] == f"/runs/{run_id}", text
        assert problem in html.unescape(admin.get(console.url + answer.headers["location"], timeout=20).text), text
    view = console.run(run_id)
    assert view["status"] == "ERROR" and not [e for e in view["events"] if e["kind"] in ("retried", "forked")]


def test_the_printable_record_of_a_retried_run(console: ApiGateway, visit: Visit, tmp_path: Path) -> None:
    run_id, _side, flag = _failed_run(console, tmp_path)
    flag.touch()
    retried = console.call("POST", f"/api/v1/runs/{run_id}/retry", "engineer", json={"reason": "MES is back"})
    assert retried.status_code == 202, retried.text
    wait_until(lambda: console.run(run_id)["status"] == "SUCCESS", 20, message="the retried run to succeed")
    page = visit("viewer")
    page.goto(f"{console.url}/runs/{run_id}")
    page.get_by_role("link", name="Batch record").click()
    expect(page).to_have_url(f"{console.url}/runs/{run_id}/record")
    record = page.locator("#batch-record")
    expect(record.locator(".run-id")).to_have_text(run_id)  # the whole id
    exceptions = page.locator("#record-exceptions")
    expect(exceptions).to_contain_text("run_retried")
    expect(exceptions).to_contain_text("MES is back")
    expect(exceptions).to_contain_text("token:engineer-token")
    expect(exceptions).to_contain_text("ConnectionError: MES refused the connection")
    expect(exceptions.locator("tbody tr")).to_have_count(1)  # the retry's execution is no restart
    expect(page.locator("#record-steps tbody tr")).to_have_count(3)
    assert record.evaluate("node => node.firstElementChild.nextElementSibling.id") == "record-exceptions"
    screenshot(page, "record")
    expect(page.locator("header.top")).to_be_visible()
    page.emulate_media(media="print")
    expect(page.locator("header.top")).to_be_hidden()  # the print stylesheet leaves the record alone
    expect(page.locator(".record-actions")).to_be_hidden()
    expect(record).to_be_visible()
    pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF") and len(pdf) > 5_000
