"""The batch record of a real run (``Runtime.record``) against a Modbus server: a tag write, a step
retried, an operator's HOLD and RESUME, a command the run dropped, a prompt answered by one person
and verified by another, a write the device refused; each in its section with its actor, and each
abnormal thing in the exceptions (an answer refused for its range among them). The printable HTML
of the same record shows them all."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from exchange._record import render_document
from exchange.errors import InvalidAnswer
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps import control, operator, tags
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.steps.conftest import StepEngine
from tests.steps.test_tags_steps import TAGS, plc  # noqa: F401 (the Modbus server fixture)
from tests.waiting import wait_until

_flaky_calls: dict[str, int] = {}
_flaky_lock = threading.Lock()


@step(name="record.flaky", options={"retries_allowed": True, "max_attempts": 3, "interval_seconds": 0.01})
def flaky(key: str) -> str:
    with _flaky_lock:
        _flaky_calls[key] = _flaky_calls.get(key, 0) + 1
        if _flaky_calls[key] == 1:
            raise ConnectionError("the scale did not answer")
    return "weighed"


@workflow(name="record.batch")
def batch(setpoint: float, key: str) -> dict[str, Any]:
    tags.write("[plant]Tank/Setpoint", setpoint)
    weighed = flaky(key)
    control.checkpoint(wait_ms=20_000)  # takes the HOLD, waits for the RESUME
    answer = operator.prompt("density", "Density of the batch", fields={"density": {"type": "float", "max": 1.2}},
                             verify_role="engineer")
    control.checkpoint(wait_ms=0)  # the second RESUME is dropped here: the run is RUNNING
    return {"weighed": weighed, "density": answer["values"]["density"]}


@workflow(name="record.refused_write")
def refused_write() -> None:
    tags.write("[plant]Tank/Level", 3.0)  # read-only: refused before anything is sent


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:  # noqa: F811
    return make_engine(devices={"plc": modbus_settings(plc.port)}, tags=TAGS)


def kinds(record: dict[str, Any]) -> list[str]:
    return [item["kind"] for item in record["exceptions"]]


def test_the_record_of_a_run_holds_each_thing_it_did_with_its_actor(engine: StepEngine,
                                                                     plc: ModbusSimServer) -> None:  # noqa: F811
    rt = getWorkflows()
    runtime = engine.runtime
    run_id = runtime.start("record.batch", {"setpoint": 42.5, "key": "b1"}, actor="planner")
    runtime.send_command(run_id, "HOLD", "foam in the tank", actor="olga")
    wait_until(lambda: runtime.get_run(run_id, steps=False, events=False)["state"] == "HELD", 20,
               message="the run to hold")
    runtime.send_command(run_id, "RESUME", "foam gone", actor="olga")
    wait_until(lambda: rt.getRun(run_id)["prompt"], 20, message="the prompt to open")
    runtime.send_command(run_id, "RESUME", "twice by mistake", actor="olga")
    with pytest.raises(InvalidAnswer, match="above the maximum 1.2"):
        runtime.answer_prompt(run_id, "density", {"density": 1.5}, actor="anna", role="operator", reason="typo")
    runtime.answer_prompt(run_id, "density", {"density": 1.02}, actor="anna", role="operator", reason="sheet 7")
    runtime.verify_prompt(run_id, "density", actor="eve", role="engineer", reason="checked")
    view = runtime.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert plc.get("HRF3") == 42.5

    record = runtime.record(run_id[:8])  # a prefix names it as everywhere
    assert set(record) >= {"run", "steps", "commands", "prompts", "tag_writes", "phases", "units", "exceptions",
                           "values", "signatures", "audit_head"}
    no_values = {"interval_ms": None, "tags": {}, "gaps": {}, "complete": True}  # no [record] tags
    assert (record["values"], record["signatures"]) == (no_values, [])
    # everything the run, its gateway and the operators wrote is a link of its intact audit chain
    (chain,) = runtime.verify_audit([run_id[:8]])
    assert (chain["run"], chain["state"], chain["problem"], chain["head"]) == (run_id, "ok", None,
                                                                               record["audit_head"])
    assert chain["links"] > 10 and len(record["audit_head"]) == 64
    run = record["run"]
    assert (run["id"], run["workflow"], run["status"], run["created_by"]) == (run_id, "record.batch", "SUCCESS",
                                                                              "planner")
    assert run["params"] == {"setpoint": 42.5, "key": "b1"} and run["result"] == {"weighed": "weighed",
                                                                                 "density": 1.02}
    assert run["code_version"] == view["code_version"] and run["template"] is None and run["finished_at"]
    assert [s["name"] for s in record["steps"]] == [s["name"] for s in view["steps"]]
    assert record["steps"][1]["attempts"] == 2

    commands = [(c["cmd"], c["actor"], c["reason"], c["outcome"]) for c in record["commands"]]
    assert commands == [("HOLD", "olga", "foam in the tank", "CONSUMED"), ("RESUME", "olga", "foam gone", "CONSUMED"),
                        ("RESUME", "olga", "twice by mistake", "DROPPED")]
    assert all(c["at"] for c in record["commands"])
    (prompt,) = record["prompts"]
    assert (prompt["key"], prompt["values"], prompt["by"], prompt["verified_by"], prompt["status"]) == (
        "density", {"density": 1.02}, "anna", "eve", "ANSWERED")
    assert prompt["reason"] == "sheet 7" and prompt["signatures"] == [] and prompt["verified_at"]
    (write,) = record["tag_writes"]
    assert (write["tag"], write["value"], write["outcome"], write["step"]) == (
        "[plant]Tank/Setpoint", 42.5, "written", "tags.write")
    assert write["actor"] and write["step_seq"] == 1
    assert record["phases"] == [] and record["units"] == []

    assert kinds(record) == ["retry", "hold", "command", "answer_refused", "command_dropped"]
    retry, hold, resume, refused, dropped = record["exceptions"]
    assert "the scale did not answer" in retry["detail"] and retry["step_seq"] == 2
    assert (hold["actor"], hold["reason"], hold["detail"]) == ("olga", "foam in the tank",
                                                                "HOLD accepted in state RUNNING")
    assert (resume["actor"], resume["reason"]) == ("olga", "foam gone")
    assert (refused["actor"], refused["reason"]) == ("anna", "typo")
    assert refused["detail"].startswith("an answer to density was refused: field density: ")
    assert "1.5" in refused["detail"]
    assert (dropped["actor"], dropped["detail"]) == ("olga", "RESUME dropped in state RUNNING: RESUME is not "
                                                              "accepted in state RUNNING")
    assert [item["at"] for item in record["exceptions"]] == sorted(item["at"] for item in record["exceptions"])

    page = render_document(record)
    assert run_id in page and "<script" not in page and "@media print" in page
    assert page.index("Exceptions (5)") < page.index("Prompts (1)") < page.index("Steps (")
    for shown in ("foam in the tank", "twice by mistake", "anna", "eve", "[plant]Tank/Setpoint", "42.5",
                  "{&#34;density&#34;: 1.02}"):
        assert shown in page, shown


def test_a_refused_write_and_a_failed_run_are_exceptions(engine: StepEngine) -> None:
    view = engine.run("record.refused_write")
    assert view["status"] == "ERROR"
    record = engine.runtime.record(view["id"])
    assert kinds(record) == ["failure", "failure"], record["exceptions"]
    step_failure, run_failure = record["exceptions"]
    assert step_failure["step_seq"] == 1 and "tags.write ERROR" in step_failure["detail"]
    assert run_failure["detail"].startswith("the run ended ERROR: ") and record["tag_writes"] == []
    assert record["run"]["error"]["type"] == view["error"]["type"]
