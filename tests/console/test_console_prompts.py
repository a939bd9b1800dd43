"""The run page's prompt in a real headless Chromium against a real gateway: the form appears when
the run opens the prompt (no reload by hand), one labelled input per field (a field's own label
where it has one, a text field's pattern checked by the browser too); a value the server refuses
comes back naming the field; an operator submits, an engineer verifies; screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.api.conftest import PASSWORD, ApiGateway, start_api_gateway
from tests.console.conftest import Visit, screenshot
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

PROMPT_APP = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import operator


@workflow(name="console.transfer")
def transfer(batch="B-200"):
    rt = getWorkflows()
    rt.progress("waiting for the lab sample")
    rt.recv("sample taken", timeoutSeconds=120)
    answer = operator.prompt(
        "lab_result", "Enter the lab result for batch %s" % batch,
        fields={"density": {"type": "float", "min": 0.9, "max": 1.2, "unit": "g/cm3"},
                "approved": {"type": "bool"},
                "grade": {"type": "choice", "choices": ["A", "B", "C"]},
                "lot": {"type": "text", "label": "Lot number", "pattern": r"^L-\\d{6}$"},
                "note": {"type": "text", "required": False}},
        role="operator", verify_role="engineer")
    rt.progress("dosing")
    return answer
'''


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("console-prompts")), zygote=exchange_zygote)
    env.write_app("prompt_app", PROMPT_APP)
    yield from start_api_gateway(env)


def test_an_operator_answers_the_form_and_an_engineer_verifies(console: ApiGateway, visit: Visit) -> None:
    answer = console.call("POST", "/api/v1/runs", "engineer", json={"workflow": "console.transfer", "params": {}})
    run_id = answer.json()["id"]
    runs_page = visit("viewer")
    runs_page.goto(f"{console.url}/runs")
    needing = runs_page.locator("#attention")
    expect(needing).to_be_hidden()  # nothing needs anyone yet
    page = visit("operator")
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.locator("#progress")).to_have_text("waiting for the lab sample")
    expect(page.locator("#prompt")).to_have_count(0)
    assert console.call("POST", f"/api/v1/runs/{run_id}/commands", "operator",
                        json={"cmd": "HOLD"}).status_code == 202  # not this workflow's business: dropped later
    runtime = console.env.runtime()
    try:
        runtime.send(run_id, "sample taken", True)
    finally:
        runtime.close()

    prompt = page.locator("#prompt")  # the page reloads itself when the prompt opens
    expect(needing).to_be_visible()  # the runs page, kept live, now lists it at the top
    expect(needing.locator(f"tr[data-reason='prompt'] a[href='/runs/{run_id}']")).to_have_count(1)
    expect(needing).to_contain_text("Enter the lab result for batch B-200")
    screenshot(runs_page, "runs-attention")
    expect(prompt).to_contain_text("Enter the lab result for batch B-200")
    expect(page.get_by_label("density")).to_have_attribute("type", "number")
    expect(page.get_by_label("approved")).to_have_attribute("type", "checkbox")
    expect(page.get_by_label("grade")).to_have_js_property("tagName", "SELECT")
    expect(page.get_by_label("note")).to_have_attribute("type", "text")
    lot = page.get_by_label("Lot number")  # the field's label, not its name
    expect(page.get_by_label("lot", exact=True)).to_have_count(0)
    expect(lot).to_have_attribute("name", "field.lot")
    expect(lot).to_have_attribute("pattern", r"^L-\d{6}$")
    expect(prompt).to_contain_text("g/cm3")

    page.get_by_label("density").fill("1.02")
    page.get_by_label("grade").select_option("B")
    lot.fill("L-12")
    page.get_by_role("button", name="Submit").click()  # the browser holds the form back
    assert lot.evaluate("input => input.validity.patternMismatch") is True
    expect(page.get_by_role("alert")).to_have_count(0)

    page.get_by_label("density").fill("1.5")
    page.locator("form.prompt-form").evaluate("form => form.noValidate = true")  # the server's check, not the browser's
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("alert")).to_contain_text("field 'density'")
    expect(page.get_by_role("alert")).to_contain_text("above the maximum 1.2 g/cm3")
    page.get_by_label("density").fill("1.02")
    page.get_by_label("grade").select_option("B")
    lot.fill("L-12")
    page.locator("form.prompt-form").evaluate("form => form.noValidate = true")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("alert")).to_contain_text(r"field 'lot' (Lot number): 'L-12' does not match the pattern "
                                                      r"^L-\d{6}$")
    assert console.run(run_id)["prompt"]["status"] == "OPEN"

    page.get_by_label("density").fill("1.02")
    page.get_by_label("approved").check()
    page.get_by_label("grade").select_option("B")
    lot.fill("L-004711")
    page.locator("#prompt-reason").fill("lab sheet 7")
    screenshot(page, "prompt-form")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("status")).to_contain_text("waits for verification")
    expect(prompt).to_contain_text("Answered by operator-user")
    expect(page.get_by_role("button", name="Verify")).to_have_count(0)  # not by who answered

    engineer = visit("engineer")
    engineer.goto(f"{console.url}/runs/{run_id}")
    expect(engineer.locator("#prompt")).to_contain_text("1.02")
    expect(engineer.locator("#prompt th", has_text="Lot number")).to_have_count(1)
    screenshot(engineer, "prompt-verify")
    engineer.locator("#verify-reason").fill("matches the sheet")
    engineer.get_by_role("button", name="Verify").click()
    expect(engineer.get_by_label("Meaning")).to_have_value("verified")  # a verification is a signature
    engineer.get_by_label("Password").fill(PASSWORD)
    engineer.get_by_role("button", name="Sign", exact=True).click()
    expect(engineer.get_by_role("status")).to_contain_text("verified the answer to lab_result")
    expect(engineer.locator("#status")).to_have_text("SUCCESS")

    view = wait_until(lambda: (v := console.run(run_id))["status"] == "SUCCESS" and v, 20, message="SUCCESS")
    result = view["result"]
    assert result["values"] == {"density": 1.02, "approved": True, "grade": "B", "lot": "L-004711", "note": None}
    assert (result["by"], result["verified_by"], result["reason"]) == ("operator-user", "engineer-user",
                                                                       "lab sheet 7")
    expect(page.locator("#status")).to_have_text("SUCCESS")  # the operator's page followed on its own
    expect(needing).to_be_hidden()
