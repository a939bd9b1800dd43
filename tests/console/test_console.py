"""The operator console in a real browser: sign in, watch a run live, Hold with a reason and see HELD,
Resume, start from a recipe; what each role sees; screenshots of the main pages."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.api.conftest import ApiGateway
from tests.console.conftest import PHONE, screenshot
from tests.harness import wait_until

Visit = Callable[..., Page]


def test_sign_in_refuses_a_wrong_password_and_comes_back_to_the_page_asked_for(console: ApiGateway,
                                                                               visit: Visit) -> None:
    run_id = console.start(target_level=3.0)
    page = visit(None)
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page).to_have_url(re.compile(r"/signin\?next="))
    screenshot(page, "signin")
    page.get_by_label("User").fill("operator-user")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("wrong user name or password")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{console.url}/runs/{run_id}")
    expect(page.locator("h1")).to_contain_text("api.batch")


def test_an_operator_watches_progress_live_then_holds_and_resumes_with_a_reason(console: ApiGateway,
                                                                                visit: Visit) -> None:
    run_id = console.start(target_level=400.0)
    page = visit("operator")
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.locator("#state")).to_have_text("RUNNING")
    expect(page.locator("#progress")).to_have_text("filling")
    legend = page.locator("#trend-legend")
    first = legend.inner_text()
    assert first.startswith("level ")
    expect(legend).not_to_have_text(first)  # the level goes on rising with no reload: the stream
    line = page.locator("#trend-chart polyline[data-key='level']")
    wait_until(lambda: len((line.get_attribute("points") or "").split()) >= 3, 20,
               message="the trend to draw the level")
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)  # engineers only

    page.get_by_label("Reason").fill("pump 2 cavitating")
    page.get_by_role("button", name="Hold").click()
    expect(page.get_by_role("status")).to_contain_text("HOLD sent")
    expect(page.locator("#state")).to_have_text("HELD")
    expect(page.get_by_role("button", name="Hold")).to_be_disabled()
    expect(page.get_by_role("button", name="Resume")).to_be_enabled()
    expect(page.get_by_role("button", name="Abort")).to_be_enabled()  # like Stop: in any state
    audit = page.locator("table.audit")
    expect(audit).to_contain_text("pump 2 cavitating")
    expect(audit).to_contain_text("operator-user")
    screenshot(page, "run-held")
    held = console.run(run_id)
    assert held["state"] == "HELD"
    sent = [e for e in held["events"] if e["kind"] == "command_sent"]
    assert [(e["actor"], e["reason"], e["payload"]["cmd"]) for e in sent] == [
        ("operator-user", "pump 2 cavitating", "HOLD")]

    page.get_by_label("Reason").fill("pump swapped")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#state")).to_have_text("RUNNING")
    expect(page.get_by_role("button", name="Hold")).to_be_enabled()

    page.get_by_label("Reason").fill("leak at V-101")
    page.get_by_role("button", name="Abort").click()
    expect(page.get_by_role("status")).to_contain_text("ABORT sent")
    expect(page.locator("#state")).to_have_text("ABORTED")
    wait_until(lambda: console.run(run_id)["status"] == "SUCCESS", 20, message="the run ended by the ABORT")


def test_an_operator_starts_a_run_from_a_recipe(console: ApiGateway, visit: Visit) -> None:
    name = f"line2-{uuid.uuid4().hex[:6]}"
    saved = console.call("POST", "/api/v1/templates", "engineer",
                         json={"name": name, "workflow": "api.batch", "params": {"target_level": 12.0, "line": 2},
                               "note": "line 2, small tank"})
    assert saved.status_code == 201, saved.text
    page = visit("operator")
    page.goto(f"{console.url}/start")
    expect(page.get_by_role("link", name="api.batch")).to_have_count(0)  # free parameters: engineers
    screenshot(page, "start")
    page.get_by_role("button", name=f"Start {name}").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    run_id = page.url.split("/runs/")[1].split("?")[0]
    run = console.run(run_id)
    assert run["params"] == {"target_level": 12.0, "line": 2} and run["created_by"] == "operator-user"
    assert [e["payload"] for e in run["events"] if e["kind"] == "template"] == [{"name": name, "version": 1}]


def test_an_engineer_fills_in_the_generated_form_and_saves_a_recipe(console: ApiGateway, visit: Visit) -> None:
    page = visit("engineer")
    page.goto(f"{console.url}/start")
    page.get_by_role("link", name="api.batch").click()
    expect(page.get_by_label("target_level")).to_have_value("40.0")
    page.get_by_label("target_level").fill("lots")
    page.get_by_role("button", name="Start", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("target_level: 'lots' is not a number")
    expect(page.get_by_label("target_level")).to_have_value("lots")  # kept as typed
    page.get_by_label("target_level").fill("8.5")
    page.get_by_label("line").fill("3")
    screenshot(page, "start-form")
    name = f"eng-{uuid.uuid4().hex[:6]}"
    page.get_by_label("Recipe name").fill(name)
    page.get_by_role("button", name="Save as recipe").click()
    expect(page.get_by_role("status")).to_contain_text(f"saved {name} version 1")
    versions = console.call("GET", f"/api/v1/templates/{name}", "viewer").json()
    assert [(v["version"], v["params"], v["created_by"]) for v in versions] == [
        (1, {"target_level": 8.5, "line": 3}, "engineer-user")]

    page.goto(f"{console.url}/start/api.batch")
    page.get_by_label("target_level").fill("2")
    page.get_by_role("button", name="Start", exact=True).click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}"))
    expect(page.get_by_role("button", name="Cancel")).to_be_enabled()
    page.get_by_label("Reason").fill("wrong tank")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#status")).to_have_text("CANCELLED")


def test_a_viewer_sees_runs_live_but_no_command_button(console: ApiGateway, visit: Visit) -> None:
    page = visit("viewer")
    expect(page.get_by_role("link", name="Start")).to_have_count(0)
    expect(page.locator("#live")).to_have_class(re.compile("on"))
    run_id = console.start(target_level=2.0)
    expect(page.locator(f"#runs tr[data-id='{run_id}']")).to_have_count(1)  # appears with no reload
    screenshot(page, "runs")
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.locator("#status")).to_be_visible()
    for label in ("Hold", "Resume", "Stop", "Abort", "Reset", "Cancel"):
        expect(page.get_by_role("button", name=label)).to_have_count(0)
    expect(page.get_by_label("Reason")).to_have_count(0)


def test_queues_admin_and_a_phone_sized_screen(console: ApiGateway, visit: Visit) -> None:
    console.start(target_level=1.0)
    page = visit("admin")
    page.goto(f"{console.url}/queues")
    expect(page.locator("table.queues")).to_contain_text("default")
    screenshot(page, "queues")
    page.goto(f"{console.url}/admin")
    name = f"nina{uuid.uuid4().hex[:4]}"
    page.get_by_label("Name").fill(name)
    page.get_by_label("Role").select_option("operator")
    page.get_by_label("Password").fill("shift-b-password")
    page.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("status")).to_contain_text(f"user {name} added")
    expect(page.locator("table.users").first).to_contain_text(name)

    page.get_by_label("Reason").fill("gateway update")
    page.get_by_role("button", name="Drain", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("maintenance: drain")
    expect(page.locator("#maintenance .badge")).to_have_text("drain")
    expect(page.locator("#maintenance")).to_contain_text("by admin-user (gateway update)")
    queued = console.start(target_level=1.0)
    assert console.run(queued)["status"] == "ENQUEUED"
    screenshot(page, "admin")
    page.get_by_role("button", name="Back to normal").click()
    expect(page.locator("#maintenance .badge")).to_have_text("normal")
    wait_until(lambda: console.run(queued)["status"] != "ENQUEUED", 20, message="the queued run after maintenance")

    phone = visit("operator", viewport=PHONE)
    run_id = console.start(target_level=500.0)
    phone.goto(f"{console.url}/runs/{run_id}")
    expect(phone.locator("#state")).to_have_text("RUNNING")
    hold = phone.get_by_role("button", name="Hold")
    box = hold.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone_line = phone.locator("#trend-chart polyline")
    wait_until(lambda: phone_line.count() == 1 and len((phone_line.get_attribute("points") or "").split()) >= 3, 20,
               message="the trend to draw on the phone")
    screenshot(phone, "run-phone")
