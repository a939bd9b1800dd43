"""Operator prompts in a real engine on SQLite and PostgreSQL: typed answers checked field by field,
a second person's verification, timeouts, STOP, ABORT and cancel, a restart while a prompt waits."""

from __future__ import annotations

from typing import Any

import pytest

from exchange.errors import (
    AbortRequested,
    InvalidAnswer,
    NotAllowed,
    PromptNotOpen,
    PromptTimeout,
    StopRequested,
)
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import operator
from tests.engine.conftest import Engine
from tests.waiting import wait_until

LAB_FIELDS = {
    "density": {"type": "float", "min": 0.9, "max": 1.2, "unit": "g/cm3"},
    "approved": {"type": "bool"},
    "grade": {"type": "choice", "choices": ["A", "B", "C"]},
    "batches": {"type": "int", "min": 1, "default": 1},
    "note": {"type": "text", "required": False},
}


@workflow(name="prompts.lab")
def lab(verify_role: str | None = None, timeout_s: float | None = None, role: str = "operator") -> Any:
    rt = getWorkflows()
    try:
        answer = operator.prompt("lab_result", "Enter the lab result for batch B-200", fields=LAB_FIELDS,
                                 role=role, verify_role=verify_role, timeout_s=timeout_s)
    except PromptTimeout as exc:
        return {"timeout": exc.key}
    except StopRequested as exc:
        return {"stopped": exc.command["cmd"] if isinstance(exc.command, dict) else None,
                "aborted": isinstance(exc, AbortRequested), "next": rt.recvCommand(timeoutSeconds=0)}
    after = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0)
    return {"answer": answer, "command_after": None if after is None else after["cmd"]}


@workflow(name="prompts.twice")
def twice() -> Any:
    operator.prompt("k", "first", fields={"ok": {"type": "bool"}})
    return operator.prompt("k", "second", fields={"ok": {"type": "bool"}})


def open_prompt(run_id: str) -> dict[str, Any]:
    rt = getWorkflows()
    return wait_until(lambda: rt.getRun(run_id)["prompt"], 20, message="the prompt to open")


GOOD = {"density": 1.02, "approved": True, "grade": "B"}


@pytest.mark.parametrize(("values", "field", "words"), [
    ({**GOOD, "density": "1.02"}, "density", "expects a float"),
    ({**GOOD, "density": 1.5}, "density", "above the maximum 1.2 g/cm3"),
    ({**GOOD, "approved": 1}, "approved", "true or false"),
    ({**GOOD, "grade": "D"}, "grade", "not one of A, B, C"),
    ({**GOOD, "batches": 2.5}, "batches", "whole number"),
    ({**GOOD, "densty": 1.0}, "densty", "did you mean 'density'"),
    ({"approved": True, "grade": "A"}, "density", "a value is required"),
])
def test_an_answer_that_breaks_a_field_is_refused_naming_it_and_the_prompt_stays_open(
    engine: Engine, values: dict[str, Any], field: str, words: str
) -> None:
    rt = getWorkflows()
    run_id = rt.start("prompts.lab", {})
    open_prompt(run_id)
    with pytest.raises(InvalidAnswer) as refused:
        rt.runtime.answer_prompt(run_id, "lab_result", values, actor="anna")
    assert refused.value.field == field and words in str(refused.value)
    prompt = rt.getRun(run_id)["prompt"]
    assert prompt["status"] == "OPEN" and prompt["answered_by"] is None
    rt.runtime.answer_prompt(run_id, "lab_result", GOOD, actor="anna", reason="lab sheet 7")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    answer = view["result"]["answer"]
    assert answer["values"] == {"density": 1.02, "approved": True, "grade": "B", "batches": 1, "note": None}
    assert answer["by"] == "anna" and answer["verified_by"] is None and answer["reason"] == "lab sheet 7"
    assert view["prompt"] is None
    kinds = [(e["kind"], e["actor"]) for e in view["events"] if e["kind"].startswith("prompt_")]
    assert kinds[-1] == ("prompt_answered", "anna")
    with pytest.raises(PromptNotOpen):
        rt.runtime.answer_prompt(run_id, "lab_result", GOOD, actor="bob")


def test_a_second_different_person_of_the_verify_role_must_verify(engine: Engine) -> None:
    rt = getWorkflows()
    runtime = rt.runtime
    run_id = rt.start("prompts.lab", {"verify_role": "engineer"})
    open_prompt(run_id)
    with pytest.raises(NotAllowed, match=r"vic has role viewer; answering prompts needs the right 'answer' "
                                         r"\(roles with it: operator, engineer, admin\)"):
        runtime.answer_prompt(run_id, "lab_result", GOOD, actor="vic", role="viewer")
    first = runtime.answer_prompt(run_id, "lab_result", GOOD, actor="anna", role="operator", reason="sheet 7")
    assert first["status"] == "AWAITING_VERIFICATION" and first["values"]["density"] == 1.02
    with pytest.raises(PromptNotOpen, match="waits for verification"):
        runtime.answer_prompt(run_id, "lab_result", GOOD, actor="bob", role="operator")
    with pytest.raises(NotAllowed, match="second, different person"):
        runtime.verify_prompt(run_id, "lab_result", actor="anna", role="admin")
    for same in ("ANNA", "anna@hmi-2"):  # one person under another case, or as an OS account
        with pytest.raises(NotAllowed, match=rf"{same} answered prompt 'lab_result' \(as anna\): a second"):
            runtime.verify_prompt(run_id, "lab_result", actor=same, role="admin")
    with pytest.raises(NotAllowed, match="not a person"):  # a program (an API token) takes no part
        runtime.verify_prompt(run_id, "lab_result", actor="token:qa", role="admin", person=False)
    with pytest.raises(NotAllowed, match="needs the engineer role"):
        runtime.verify_prompt(run_id, "lab_result", actor="bob", role="operator")
    back = runtime.verify_prompt(run_id, "lab_result", actor="eve", role="engineer", reject=True, reason="redo")
    assert back["status"] == "OPEN" and back["answered_by"] is None
    assert rt.getRun(run_id, )["status"] == "RUNNING"
    runtime.answer_prompt(run_id, "lab_result", {**GOOD, "density": 1.01}, actor="anna", role="operator")
    done = runtime.verify_prompt(run_id, "lab_result", actor="eve", role="engineer", reason="checked")
    assert done["status"] == "ANSWERED"
    view = rt.waitFor(run_id, 20)
    answer = view["result"]["answer"]
    assert (answer["values"]["density"], answer["by"], answer["verified_by"]) == (1.01, "anna", "eve")
    audit = [(e["kind"], e["actor"], e["reason"]) for e in view["events"] if e["kind"].startswith("prompt_")]
    assert audit[1:] == [("prompt_answered", "anna", "sheet 7"), ("prompt_rejected", "eve", "redo"),
                         ("prompt_answered", "anna", None), ("prompt_verified", "eve", "checked")]


def test_a_prompt_without_an_answer_times_out_and_closes(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("prompts.lab", {"timeout_s": 0.5})
    view = rt.waitFor(run_id, 20)
    assert view["result"] == {"timeout": "lab_result"}
    with pytest.raises(PromptNotOpen, match="TIMED_OUT|the run is SUCCESS"):
        rt.runtime.answer_prompt(run_id, "lab_result", GOOD, actor="anna")


def test_stop_ends_the_wait_and_hold_stays_for_the_next_recv_command(engine: Engine) -> None:
    rt = getWorkflows()
    held = rt.start("prompts.lab", {})
    open_prompt(held)
    rt.sendCommand(held, "HOLD", reason="lunch")
    rt.runtime.answer_prompt(held, "lab_result", GOOD, actor="anna")
    assert rt.waitFor(held, 20)["result"]["command_after"] == "HOLD"

    stopped = rt.start("prompts.lab", {})
    open_prompt(stopped)
    rt.sendCommand(stopped, "STOP", reason="batch scrapped")
    rt.sendCommand(stopped, "HOLD", reason="after the stop")
    view = rt.waitFor(stopped, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["stopped"] == "STOP" and not view["result"]["aborted"]
    assert view["result"]["next"]["cmd"] == "HOLD"  # sent after the STOP: left for the next receive
    assert rt.runtime.open_prompts(run_id=stopped) == []


def test_abort_ends_the_wait_as_an_abort_and_wins_over_a_stop_waiting_with_it(engine: Engine) -> None:
    rt = getWorkflows()
    aborted = rt.start("prompts.lab", {})
    open_prompt(aborted)
    rt.sendCommand(aborted, "ABORT", reason="leak at V-101")
    view = rt.waitFor(aborted, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert (view["result"]["stopped"], view["result"]["aborted"], view["result"]["next"]) == ("ABORT", True, None)
    assert rt.runtime.open_prompts(run_id=aborted) == []

    # Sent while no gateway executes the run, both are read by one look when it resumes: the ABORT wins.
    both = rt.start("prompts.lab", {})
    open_prompt(both)
    engine.dispatcher.stop()
    rt.sendCommand(both, "STOP", reason="end of shift")
    rt.sendCommand(both, "ABORT", reason="leak at V-101")
    engine.restart()
    rt = getWorkflows()
    view = rt.waitFor(both, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert (view["result"]["stopped"], view["result"]["aborted"], view["result"]["next"]) == ("ABORT", True, None)
    dropped = [(e["payload"]["cmd"], e["reason"]) for e in view["events"] if e["kind"] == "command_dropped"]
    assert dropped == [("STOP", "superseded by ABORT received in the same poll")]


def test_a_cancelled_run_leaves_no_open_prompt(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("prompts.lab", {})
    open_prompt(run_id)
    assert [p["run"] for p in rt.runtime.open_prompts()] == [run_id]
    rt.cancel(run_id)
    assert rt.waitFor(run_id, 20)["status"] == "CANCELLED"
    assert rt.runtime.open_prompts() == []
    with pytest.raises(PromptNotOpen, match="the run is CANCELLED"):
        rt.runtime.answer_prompt(run_id, "lab_result", GOOD, actor="anna")


def test_a_prompt_waits_on_across_a_restart_and_an_answer_given_while_no_gateway_ran(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("prompts.lab", {})
    open_prompt(run_id)
    engine.dispatcher.stop()  # the gateway stops; the run waits in the store
    rt.runtime.answer_prompt(run_id, "lab_result", GOOD, actor="anna")
    engine.restart()
    rt = getWorkflows()
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["answer"]["by"] == "anna"
    assert [s["name"] for s in view["steps"]].count("exchange.prompt") == 1


def test_a_prompt_key_is_unique_within_its_run(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("prompts.twice", {})
    open_prompt(run_id)
    rt.runtime.answer_prompt(run_id, "k", {"ok": True}, actor="anna")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR"
    assert "'k' was used by the prompt at sequence 1" in view["error"]["message"]


@workflow(name="prompts.bad")
def bad(args: dict[str, Any]) -> Any:
    return operator.prompt(**args)


BAD_PROMPT_ARGUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"fields": {}}, "non-empty dict"),
    ({"fields": {"x": {"type": "decimal"}}}, "type must be one of"),
    ({"fields": {"x": {"type": "float", "mni": 1}}}, "did you mean 'min'"),
    ({"fields": {"x": {"type": "choice", "choices": []}}}, "choices must be a list"),
    ({"fields": {"x": {"type": "int", "min": 5, "max": 1}}}, "above max"),
    ({"fields": {"x": {"type": "int", "default": "one"}}}, "the default does not fit"),
    ({"fields": {"lot": {"type": "text", "pattern": r"^L-(\d{6}$"}}},
     "field 'lot': pattern '^L-(\\\\d{6}$' is not a valid regular expression: missing ), unterminated subpattern"),
    ({"fields": {"lot": {"type": "text", "pattern": r"^L-\d{6}$", "default": "L-1"}}},
     "the default does not fit: 'L-1' does not match the pattern ^L-\\d{6}$"),
    ({"fields": {"x": {"type": "int", "pattern": "[0-9]+"}}}, "unknown key 'pattern'"),
    ({"fields": {"x": {"type": "bool", "label": "Approved\nreally"}}},
     "field 'x': label holds a control character U+000A"),
    ({"fields": {"x": {"type": "bool", "label": "  "}}}, "field 'x': label must be text of 1 to 200 characters"),
    ({"fields": {"x": {"type": "text", "default": " "}}}, "the default does not fit: blank text is no value"),
    ({"role": "viewer"}, "role must be one of operator, engineer, admin"),
    ({"verify_role": "boss"}, "verify_role must be one of"),
    ({"timeout_s": 0}, "timeout_s must be None or a finite number"),
    ({"key": ""}, "key"),
]


def test_bad_prompt_arguments_are_refused_before_anything_is_written(engine: Engine) -> None:
    rt = getWorkflows()
    started = []  # every case at once: a run each, on one engine
    for kwargs, words in BAD_PROMPT_ARGUMENTS:
        args: dict[str, Any] = {"key": "k", "text": "t", "fields": {"x": {"type": "bool"}}, **kwargs}
        started.append((rt.start("prompts.bad", {"args": args}), kwargs, words))
    for run_id, kwargs, words in started:
        view = rt.waitFor(run_id, 20)
        assert view["status"] == "ERROR" and view["error"]["type"].endswith("InvalidArgument"), (kwargs, view["error"])
        assert words in view["error"]["message"], kwargs
        assert not [e for e in view["events"] if e["kind"] == "prompt_opened"], kwargs


def test_the_deadline_is_kept_by_the_store_while_no_gateway_executes_the_run(engine: Engine) -> None:
    """An outage does not extend a prompt's timeout_s: past the deadline the store itself refuses an
    answer, a verification and a sending back, and the resumed run times the prompt out."""
    rt = getWorkflows()
    plain = rt.start("prompts.lab", {"timeout_s": 4.0})
    checked = rt.start("prompts.lab", {"timeout_s": 4.0, "verify_role": "engineer"})
    open_prompt(plain)
    open_prompt(checked)
    in_time = rt.runtime.answer_prompt(checked, "lab_result", GOOD, actor="anna")  # before its deadline
    assert in_time["status"] == "AWAITING_VERIFICATION"
    engine.dispatcher.stop()  # the gateway stops; nothing executes the runs or watches their deadlines
    store = rt.runtime.store
    prompts = {run_id: store.prompts.get(run_id, "lab_result") for run_id in (plain, checked)}
    assert [p.status for p in prompts.values()] == ["OPEN", "AWAITING_VERIFICATION"], "stopped too late"
    deadlines = {run_id: prompt.deadline_at for run_id, prompt in prompts.items()}
    wait_until(lambda: all(store.clock.seconds_until(at) < 0 for at in deadlines.values()), 20,
               message="the deadlines to pass")
    with pytest.raises(PromptNotOpen, match="timed out at") as late:
        rt.runtime.answer_prompt(plain, "lab_result", GOOD, actor="anna")
    assert late.value.status == "TIMED_OUT"
    with pytest.raises(PromptNotOpen, match="timed out at"):
        rt.runtime.verify_prompt(checked, "lab_result", actor="eve", role="engineer")
    with pytest.raises(PromptNotOpen, match="timed out at"):
        rt.runtime.verify_prompt(checked, "lab_result", actor="eve", role="engineer", reject=True)
    answered_at = store.prompts.get(checked, "lab_result").answered_at
    assert answered_at is not None and answered_at < deadlines[checked]
    engine.restart()
    rt = getWorkflows()
    for run_id in (plain, checked):
        view = rt.waitFor(run_id, 20)
        assert view["status"] == "SUCCESS" and view["result"] == {"timeout": "lab_result"}, view
        kinds = [(e["kind"], (e["payload"] or {}).get("status")) for e in view["events"]
                 if e["kind"].startswith("prompt_")]
        assert kinds[-1] == ("prompt_closed", "TIMED_OUT")
        assert ("prompt_verified", None) not in kinds
    assert [k for k in (e["kind"] for e in rt.getRun(plain)["events"]) if k == "prompt_answered"] == []
