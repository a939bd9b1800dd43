"""A run whose recorded history diverges from the code a gateway loaded (a step renamed under a run
waiting on a command, then the gateway restarted) is held, not failed: a WARNING names the run, the
step and both names; the run reports HELD, is on the attention list with reason ``code`` and no step
body ran. RESUME with the code still diverging holds it again with the new detail; once the code is
fixed RESUME replays it and it goes on to SUCCESS. A restart while it is held keeps it held (and
logs again); STOP ends it ERROR. On SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange._engine.definition import REGISTRY
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from tests.engine.conftest import Engine
from tests.waiting import wait_until

BODIES: list[str] = []  # every step body that ran, in order


@step(name="codehold.fill")
def fill(litres: int) -> dict[str, int]:
    BODIES.append("codehold.fill")
    return {"litres": litres}


@step(name="codehold.mix")
def mix(litres: int) -> int:
    BODIES.append("codehold.mix")
    return litres * 2


@step(name="codehold.fill_v2")
def fill_v2(litres: int) -> dict[str, int]:
    BODIES.append("codehold.fill_v2")
    return {"litres": litres}


@step(name="codehold.fill_v3")
def fill_v3(litres: int) -> dict[str, int]:
    BODIES.append("codehold.fill_v3")
    return {"litres": litres}


def batch_with(first: Callable[[int], dict[str, int]]) -> Callable[..., str]:
    def batch(litres: int = 10) -> str:
        first(litres)
        mix(litres)
        getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=60)
        mix(litres)
        return "done"
    return batch


workflow(name="codehold.batch")(batch_with(fill))


@pytest.fixture
def code() -> Iterator[Callable[[Callable[[int], dict[str, int]]], None]]:
    """``code(first_step)``: the workflow as the gateway finds it now (its registry entry replaced)."""
    original = REGISTRY.get("codehold.batch")

    def change(first: Callable[[int], dict[str, int]]) -> None:
        REGISTRY.add(dataclasses.replace(original, fn=batch_with(first), code_version=f"v-{first.__name__}"))

    yield change
    REGISTRY.add(original)


def view(run_id: str) -> dict[str, Any]:
    return getWorkflows().getRun(run_id)


def held_on_code(run_id: str, called: str) -> dict[str, Any] | None:
    shown = view(run_id)
    held = shown.get("held_on") or {}
    return shown if shown["state"] == "HELD" and held.get("cause") == "code" and called in held["error"][
        "message"] else None


def code_rows(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    return [row for row in engine.runtime.attention() if row["run"] == run_id and row["reason"] == "code"]


def start_waiting(engine: Engine) -> str:
    run_id = getWorkflows().start("codehold.batch", {"litres": 10})
    wait_until(lambda: [s["name"] for s in view(run_id)["steps"]] == ["codehold.fill", "codehold.mix"], 20,
               message="the run's two steps")
    return run_id


def test_a_diverging_run_is_held_then_resumed_once_the_code_is_fixed(
    engine: Engine, code: Callable[..., None], caplog: pytest.LogCaptureFixture,
) -> None:
    rt = getWorkflows()
    run_id = start_waiting(engine)
    caplog.set_level(logging.WARNING, logger="exchange._engine.execution.code_hold")
    code(fill_v2)  # a deploy renamed the first step
    BODIES.clear()
    engine.restart()

    shown = wait_until(lambda: held_on_code(run_id, "codehold.fill_v2"), 20, message="the run held on its code")
    detail = ("history diverges at step 1: recorded codehold.fill, the code now calls codehold.fill_v2; fix the "
              "code (exchange check-replay) and RESUME")
    assert shown["status"] == "RUNNING" and shown["error"] == {"type": "NonDeterminismError", "message": detail}
    assert (shown["held_on"]["seq"], shown["held_on"]["step"]) == (1, "codehold.fill")
    assert [row["detail"] for row in code_rows(engine, run_id)] == [detail]
    assert BODIES == []  # nothing executed
    warned = [r.getMessage() for r in caplog.records if run_id in r.getMessage()]
    assert any("at sequence 1: recorded codehold.fill, the code now calls codehold.fill_v2 with (int)" in line
               for line in warned), warned

    code(fill_v3)  # a second attempt, still diverging: RESUME holds it again, with the new detail
    rt.sendCommand(run_id, "RESUME", actor="op")
    wait_until(lambda: held_on_code(run_id, "codehold.fill_v3"), 20, message="the run held again")
    assert BODIES == []

    code(fill)  # fixed: RESUME replays the history and the run goes on
    rt.sendCommand(run_id, "RESUME", actor="op")
    wait_until(lambda: view(run_id)["state"] == "RUNNING" and view(run_id)["error"] is None, 20,
               message="the run resumed")
    assert code_rows(engine, run_id) == []
    rt.sendCommand(run_id, "HOLD", actor="op")  # what the workflow's recvCommand waits for
    done = rt.waitFor(run_id, 20)
    assert (done["status"], done["result"]) == ("SUCCESS", "done"), done
    assert BODIES == ["codehold.mix"]  # only the step after the command: the history was replayed
    kinds = [e["kind"] for e in done["events"]]
    assert kinds.count("code_held") == 2


def test_a_held_run_stays_held_across_a_restart_and_stop_ends_it(
    sqlite_engine: Engine, code: Callable[..., None], caplog: pytest.LogCaptureFixture,
) -> None:
    engine = sqlite_engine
    rt = getWorkflows()
    run_id = start_waiting(engine)
    caplog.set_level(logging.WARNING, logger="exchange._engine.execution.code_hold")
    code(fill_v2)
    BODIES.clear()
    engine.restart()
    first = wait_until(lambda: held_on_code(run_id, "codehold.fill_v2"), 20, message="the run held on its code")

    caplog.clear()
    engine.restart()  # still diverging: held again, said again, since kept
    wait_until(lambda: any(run_id in r.getMessage() for r in caplog.records), 20, message="the warning again")
    again = wait_until(lambda: held_on_code(run_id, "codehold.fill_v2"), 20, message="still held")
    assert again["held_on"]["since"] == first["held_on"]["since"]
    assert [e["kind"] for e in again["events"]].count("code_held") == 1  # the same hold, not a new one

    code(fill)
    engine.restart()  # fixed, but nobody said RESUME: it waits, saying the code replays now
    wait_until(lambda: "RESUME to go on" in (view(run_id)["error"] or {}).get("message", ""), 20,
               message="the hold says the code replays")
    assert view(run_id)["state"] == "HELD" and BODIES == []

    rt.sendCommand(run_id, "STOP", actor="op")
    done = rt.waitFor(run_id, 20)
    assert (done["status"], done["state"]) == ("ERROR", "STOPPED"), done
    assert done["error"]["type"] == "NonDeterminismError" and done["error"]["message"].startswith("STOP while held")
    assert BODIES == []
