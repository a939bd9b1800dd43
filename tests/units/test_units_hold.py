"""HOLD while a run waits for units, and units asked again when a run is retried or forked (SQLite,
one gateway): a held waiter is passed over and keeps its place on RESUME; STOP while held; the
timeout does not run while held; a restart finds the hold; a retry and a fork re-acquire the units
of a grant whose ``with`` block had not ended, and not those of one whose block had."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from exchange._engine import current_run
from exchange.errors import StopRequested, UnitTimeout
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import units
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

UNITS = {"wait_attention_s": 600, "R1": {"class": "reactor"}}
GATES: dict[str, threading.Event] = {}  # a run's body waits on its gate while it holds its units


def gate(run_id: str) -> threading.Event:
    return GATES.setdefault(run_id, threading.Event())


@workflow(name="units_hold.take")
def take(timeout_s: float | None = None) -> Any:
    rt = getWorkflows()
    started = time.monotonic()
    try:
        with units.acquire("R1", timeout_s=timeout_s) as got:
            run = current_run()
            assert run is not None
            while not gate(run.run_id).wait(0.02):  # a cancel ends the wait
                rt.checkCancelled()
            return {"got": got}
    except UnitTimeout:
        return {"timed_out_after_s": time.monotonic() - started}
    except StopRequested as stop:
        return {"stopped": stop.command["cmd"]}


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine(units=UNITS)


def holder(engine: StepEngine) -> str | None:
    return next((h.run_id for h in engine.runtime.store.units.holders() if h.unit == "R1"), None)


def waiting(engine: StepEngine) -> list[str]:
    return [w.run_id for w in engine.runtime.store.units.waiting()]


def held(engine: StepEngine) -> list[str]:
    return [w.run_id for w in engine.runtime.store.units.held_waiters()]


def state(engine: StepEngine, run_id: str) -> str | None:
    return engine.runtime.get_run(run_id, steps=False, events=False)["state"]


def command(engine: StepEngine, run_id: str, cmd: str) -> None:
    engine.runtime.send_command(run_id, cmd, f"{cmd.lower()} it", actor="op")


def start_holding(engine: StepEngine) -> str:
    run_id = engine.runtime.start("units_hold.take", {})
    wait_until(lambda: holder(engine) == run_id, message="a run to hold R1")
    return run_id


def test_a_held_waiter_is_passed_over_and_resumes_in_its_place(engine: StepEngine) -> None:
    rt = engine.runtime
    first = start_holding(engine)
    second, third = rt.start("units_hold.take", {}), None
    wait_until(lambda: waiting(engine) == [second], message="the second run to wait")
    third = rt.start("units_hold.take", {})
    wait_until(lambda: waiting(engine) == [second, third], message="the third run to wait")
    command(engine, second, "HOLD")
    wait_until(lambda: held(engine) == [second] and state(engine, second) == "HELD", message="the second held")
    assert waiting(engine) == [third]
    command(engine, second, "RESUME")
    wait_until(lambda: waiting(engine) == [second, third], message="the second back in its place")
    assert state(engine, second) == "RUNNING"
    command(engine, second, "HOLD")
    wait_until(lambda: held(engine) == [second], message="the second held again")
    gate(first).set()
    wait_until(lambda: holder(engine) == third, message="the third granted, the held run passed over")
    command(engine, second, "RESUME")
    wait_until(lambda: waiting(engine) == [second], message="the second waiting again")
    gate(third).set()
    wait_until(lambda: holder(engine) == second, message="the second granted")
    gate(second).set()
    assert [rt.wait_for(r, 10)["result"] for r in (first, second, third)] == [{"got": "R1"}] * 3
    commands = [(e["kind"], (e["payload"] or {}).get("cmd"))
                for e in rt.get_run(second)["events"] if e["kind"] in ("command", "command_dropped")]
    assert commands == [("command", "HOLD"), ("command", "RESUME")] * 2


def test_stop_while_held_and_a_restart_finds_the_hold(engine: StepEngine) -> None:
    rt = engine.runtime
    first = start_holding(engine)
    stopped, restarted = rt.start("units_hold.take", {}), rt.start("units_hold.take", {})
    wait_until(lambda: len(waiting(engine)) == 2, message="two runs waiting")
    command(engine, stopped, "HOLD")
    command(engine, restarted, "HOLD")
    wait_until(lambda: set(held(engine)) == {stopped, restarted}, message="both held")
    command(engine, stopped, "STOP")
    assert rt.wait_for(stopped, 10)["result"] == {"stopped": "STOP"}
    engine.restart()
    rt = engine.runtime
    assert held(engine) == [restarted] and state(engine, restarted) == "HELD"
    gate(first).set()
    assert rt.wait_for(first, 10)["result"] == {"got": "R1"}
    assert holder(engine) is None and held(engine) == [restarted]  # still held after the restart
    command(engine, restarted, "RESUME")
    wait_until(lambda: holder(engine) == restarted, message="granted on RESUME")
    gate(restarted).set()
    assert rt.wait_for(restarted, 10)["result"] == {"got": "R1"}


def test_the_timeout_does_not_run_while_held(engine: StepEngine) -> None:
    rt = engine.runtime
    first = start_holding(engine)
    timed = rt.start("units_hold.take", {"timeout_s": 0.4})
    command(engine, timed, "HOLD")
    wait_until(lambda: held(engine) == [timed], message="the run held while it waits")
    time.sleep(0.6)  # longer than its timeout, held all along
    assert held(engine) == [timed] and rt.get_run(timed, steps=False, events=False)["status"] == "RUNNING"
    command(engine, timed, "RESUME")
    result = rt.wait_for(timed, 10)["result"]
    assert result["timed_out_after_s"] >= 0.4 + 0.6
    gate(first).set()
    rt.wait_for(first, 10)


def test_a_retry_acquires_again_the_units_of_a_block_that_had_not_ended(engine: StepEngine) -> None:
    rt = engine.runtime
    run_id = start_holding(engine)
    rt.cancel(run_id, "wrong batch", actor="op")  # inside its with block: no release recorded
    assert rt.wait_for(run_id, 10)["status"] == "CANCELLED" and holder(engine) is None
    other = start_holding(engine)
    rt.retry(run_id, "try again", actor="op")
    wait_until(lambda: waiting(engine) == [run_id], message="the retried run to wait for R1 again")
    gate(run_id).set()  # (its body would end at once: it must not run before it holds R1)
    assert rt.get_run(run_id, steps=False, events=False)["status"] == "RUNNING" and holder(engine) == other
    gate(other).set()
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS" and view["result"] == {"got": "R1"}
    assert [s["name"] for s in view["steps"]] == ["units.acquire", "units.release"]
    assert holder(engine) is None and waiting(engine) == []


def test_a_fork_acquires_again_unless_the_block_had_ended(engine: StepEngine) -> None:
    rt = engine.runtime
    origin = start_holding(engine)
    gate(origin).set()
    assert rt.wait_for(origin, 10)["status"] == "SUCCESS"
    other = start_holding(engine)
    ended = rt.fork(origin, 3)  # the acquire and the release copied: the block had ended
    gate(ended).set()
    assert rt.wait_for(ended, 10)["result"] == {"got": "R1"}
    assert rt.store.units.of_run(ended) == [] and holder(engine) == other  # nothing asked
    inside = rt.fork(origin, 2)  # the acquire copied: its body goes on only once it holds R1
    wait_until(lambda: waiting(engine) == [inside], message="the fork to wait for R1")
    gate(inside).set()
    gate(other).set()
    view = rt.wait_for(inside, 10)
    assert view["status"] == "SUCCESS" and [s["name"] for s in view["steps"]] == ["units.acquire", "units.release"]
    (request,) = rt.store.units.of_run(inside)
    assert request.status == "RELEASED" and request.granted == ["R1"]
    assert rt.store.units.get(origin, 1).status == "RELEASED"  # type: ignore[union-attr]  # the origin's untouched
