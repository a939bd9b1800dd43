"""What a run's units look like to people, in real runs on one gateway (SQLite): ``show --json``'s
``units`` (held, waited for), ``Runtime.units`` and the attention list's ``units`` rows for a run
that waits longer than ``[units] wait_attention_s`` (naming the units, how long, who holds them),
gone once it is granted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exchange._engine.operator.attention import attention_rows
from exchange._store.runs.attention import waited_text
from tests.steps.conftest import StepEngine
from tests.units.test_units_acquire import gate, holders
from tests.waiting import wait_until

WAIT_ATTENTION_S = 0.3
UNITS = {"wait_attention_s": WAIT_ATTENTION_S, "R1": {"class": "reactor"}, "R2": {"class": "reactor"},
         "TK2": {"class": "tank"}}


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine(units=UNITS)


def unit_rows(engine: StepEngine) -> dict[str, dict[str, Any]]:
    return {row["run"]: row for row in engine.runtime.attention() if row["reason"] == "units"}


def test_held_and_waited_for_units_in_the_run_view_and_on_the_attention_list(engine: StepEngine) -> None:
    rt = engine.runtime
    first = rt.start("units_test.hold", {"names": ["R1", "R2"]})
    wait_until(lambda: holders(engine) == {"R1": first, "R2": first}, message="the first run to hold R1 and R2")
    both = rt.start("units_test.hold", {"names": ["R1", "TK2"]})
    wait_until(lambda: len(rt.store.units.waiting()) == 1, message="the second run waiting")  # asks first
    any_reactor = rt.start("units_test.hold", {"unit_class": "reactor"})
    wait_until(lambda: len(rt.store.units.waiting()) == 2, message="two runs waiting")
    asked_by_both = rt.store.units.waiting()[0].requested_at

    assert rt.get_run(first)["units"] == {"held": ["R1", "R2"], "waiting_for": []}
    assert rt.get_run(both)["units"] == {"held": [], "waiting_for": ["R1", "TK2"]}
    assert rt.get_run(any_reactor)["units"] == {"held": [], "waiting_for": ["R1", "R2"]}
    assert "units" not in rt.get_run(both, steps=False, events=False)  # only the detailed view has it
    assert [(u["unit"], u["holder"], u["waiting"]) for u in rt.units()] == [
        ("R1", first, [both, any_reactor]), ("R2", first, [any_reactor]), ("TK2", None, [both])]

    assert all(row.reason != "units" for row in attention_rows(rt.store, 1.0, units_wait_s=600))  # not long yet
    wait_until(lambda: len(unit_rows(engine)) == 2, message=lambda: f"two unit waits listed: {rt.attention()}")
    rows = unit_rows(engine)
    assert rows[both]["status"] == "RUNNING" and rows[both]["workflow"] == "units_test.hold"
    assert rows[both]["detail"].startswith("waits for R1, TK2 for ")
    assert rows[both]["detail"].endswith(f" in step 1: R1 held by run {first}; TK2 free")
    assert rows[any_reactor]["detail"].startswith("waits for a unit of class reactor (R1, R2) for ")
    assert rows[any_reactor]["detail"].endswith(f": R1 held by run {first}; R2 held by run {first}")
    assert first not in unit_rows(engine)
    assert all(row.reason != "units" for row in attention_rows(rt.store, 1.0))  # without the setting: none
    listed = {row.run_id: row for row in attention_rows(rt.store, 1.0, units_wait_s=WAIT_ATTENTION_S)
              if row.reason == "units"}
    assert listed[both].since == asked_by_both  # since it asked: one row per wait, however long it lasts

    gate(first).set()  # R1 and R2 released: R1 and TK2 go to the earlier request, R2 to the class's
    assert rt.wait_for(first, 10)["result"] == {"got": ["R1", "R2"]}
    wait_until(lambda: holders(engine) == {"R1": both, "TK2": both, "R2": any_reactor}, message="both granted")
    assert unit_rows(engine) == {}
    assert rt.get_run(both)["units"] == {"held": ["R1", "TK2"], "waiting_for": []}
    assert rt.get_run(first)["units"] == {"held": [], "waiting_for": []}
    for run_id in (both, any_reactor):
        gate(run_id).set()
        assert rt.wait_for(run_id, 10)["units"] == {"held": [], "waiting_for": []}


def test_a_wait_is_told_in_seconds_minutes_or_hours() -> None:
    assert [waited_text(s) for s in (-1.0, 0.4, 45.0, 119.9, 120.0, 725.0, 7199.0, 7200.0, 11_100.0)] == [
        "0 s", "0 s", "45 s", "119 s", "2 min", "12 min", "119 min", "2 h 0 min", "3 h 5 min"]
