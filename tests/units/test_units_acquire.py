"""``units.acquire`` in real runs on one gateway (SQLite): a unit held by one run at a time, the next
woken when it is released; any one of a class; all or none; UnitTimeout; STOP while waiting; a
cancelled holder's units go to the next run; a replay after a restart gets the same unit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exchange._engine import current_run
from exchange.errors import InvalidArgument, StopRequested, UnitTimeout
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import units
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

UNITS = {"wait_attention_s": 600, "R1": {"class": "reactor"}, "R2": {"class": "reactor"},
         "TK2": {"class": "tank"}}
GATES: dict[str, threading.Event] = {}  # a run's body waits on its gate while it holds its units


def gate(run_id: str) -> threading.Event:
    return GATES.setdefault(run_id, threading.Event())


@workflow(name="units_test.hold")
def hold(names: list[str] | None = None, unit_class: str | None = None, timeout_s: float | None = None) -> Any:
    rt = getWorkflows()
    try:
        with units.acquire(*(names or []), unit_class=unit_class, timeout_s=timeout_s) as got:
            rt.setState("RUNNING")
            run = current_run()
            assert run is not None
            while not gate(run.run_id).wait(0.02):  # a cancel ends the wait
                rt.checkCancelled()
            return {"got": got}
    except UnitTimeout as timeout:
        return {"timed_out": timeout.units}
    except StopRequested as stop:
        return {"stopped": stop.command["cmd"]}


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine(units=UNITS)


def holders(engine: StepEngine) -> dict[str, str]:
    return {h.unit: h.run_id for h in engine.runtime.store.units.holders()}


def test_one_run_at_a_time_and_the_next_is_woken_on_release(engine: StepEngine) -> None:
    rt = engine.runtime
    first = rt.start("units_test.hold", {"names": ["R1"]})
    wait_until(lambda: holders(engine).get("R1") == first, message="the first run to hold R1")
    second = rt.start("units_test.hold", {"names": ["R1", "TK2"]})
    wait_until(lambda: [w.run_id for w in rt.store.units.waiting()] == [second], message="the second to wait")
    assert "TK2" not in holders(engine)  # all or none
    gate(first).set()
    assert rt.wait_for(first, 10)["result"] == {"got": "R1"}
    wait_until(lambda: holders(engine) == {"R1": second, "TK2": second}, message="the second run woken")
    gate(second).set()
    view = rt.wait_for(second, 10)
    assert view["result"] == {"got": ["R1", "TK2"]}
    assert [s["name"] for s in view["steps"]] == ["units.acquire", "units.release"]
    assert holders(engine) == {}


def test_any_unit_of_a_class_and_a_timeout(engine: StepEngine) -> None:
    rt = engine.runtime
    a = rt.start("units_test.hold", {"unit_class": "reactor"})
    b = rt.start("units_test.hold", {"unit_class": "reactor"})
    wait_until(lambda: set(holders(engine)) == {"R1", "R2"}, message="both reactors taken")
    c = rt.start("units_test.hold", {"unit_class": "reactor", "timeout_s": 0.3})
    assert rt.wait_for(c, 10)["result"] == {"timed_out": ["reactor"]}
    assert rt.store.units.waiting() == []  # its request withdrawn
    for run_id in (a, b):
        gate(run_id).set()
    assert sorted(rt.wait_for(r, 10)["result"]["got"] for r in (a, b)) == ["R1", "R2"]


def test_stop_while_waiting_and_a_cancelled_holder_frees_its_unit(engine: StepEngine) -> None:
    rt = engine.runtime
    holder = rt.start("units_test.hold", {"names": ["TK2"]})
    wait_until(lambda: holders(engine).get("TK2") == holder, message="TK2 held")
    stopped = rt.start("units_test.hold", {"names": ["TK2"]})
    waiter = rt.start("units_test.hold", {"names": ["TK2"]})
    wait_until(lambda: len(rt.store.units.waiting()) == 2, message="two waiting")
    rt.send_command(stopped, "STOP", "not today", actor="op")
    assert rt.wait_for(stopped, 10)["result"] == {"stopped": "STOP"}
    rt.cancel(holder, "wrong batch", actor="op")
    assert rt.wait_for(holder, 10)["status"] == "CANCELLED"
    wait_until(lambda: holders(engine).get("TK2") == waiter, message="the waiter granted on the cancel")
    gate(waiter).set()
    assert rt.wait_for(waiter, 10)["result"] == {"got": "TK2"}


def test_a_run_restarted_while_holding_keeps_its_unit(engine: StepEngine, tmp_path: Path) -> None:
    rt = engine.runtime
    run_id = rt.start("units_test.hold", {"names": ["R2"]})
    wait_until(lambda: holders(engine).get("R2") == run_id, message="R2 held")
    gate(run_id).set()  # (the body may finish before or after the restart: either way once, with R2)
    engine.restart()
    view = engine.runtime.wait_for(run_id, 10)
    assert view["result"] == {"got": "R2"}
    assert [s["name"] for s in view["steps"]].count("units.acquire") == 1


def test_bad_arguments_are_refused_before_anything_is_asked(engine: StepEngine) -> None:
    @workflow(name="units_test.bad")
    def bad(case: str) -> Any:
        calls: dict[str, Callable[[], Any]] = {
            "unknown": lambda: units.acquire("R9"), "both": lambda: units.acquire("R1", unit_class="reactor"),
            "class": lambda: units.acquire(unit_class="boiler"), "none": lambda: units.acquire(),
            "twice": lambda: units.acquire("R1", "R1"), "timeout": lambda: units.acquire("R1", timeout_s=0),
        }
        with calls[case]():
            return "held"

    for case, words in [("unknown", "R9"), ("both", "not both"), ("class", "boiler"), ("none", "at least one"),
                        ("twice", "named twice"), ("timeout", "timeout_s")]:
        view = engine.run("units_test.bad", {"case": case})
        assert view["status"] == "ERROR" and view["error"]["type"].endswith("InvalidArgument"), (case, view)
        assert words in view["error"]["message"], (case, view["error"])
    assert engine.runtime.store.units.waiting() == [] and InvalidArgument
