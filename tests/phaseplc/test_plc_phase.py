"""The test PLC behaves as docs/phases-plc.md says a phase's PLC program must, over real sockets:
each test runs against the OPC UA PLC and the Modbus PLC (``phase_plc``), written and read through
Exchange's own TagService on the config text the PLC gives (checked as a gateway checks it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from exchange._tags.service import TagService
from tests.phaseplc.logic import PackmlPhase, PhaseLogic, PliPhase
from tests.phaseplc.modbus_phase import ModbusPhasePlc
from tests.phaseplc.opcua_phase import OpcUaPhasePlc
from tests.phaseplc.plant import HEARTBEAT_TAG, load_plant, tag_path
from tests.waiting import holds_for, wait_until

START, HOLD, RESTART, STOP, RESET, ABORT = 1, 4, 5, 6, 7, 8  # PLI commands, as the docs page numbers them
IDLE, RUNNING, COMPLETE, RESTARTING, HOLDING, HELD = 1, 2, 3, 4, 8, 9
STOPPED, ABORTED, PERMISSIVE = 11, 13, 17


class Phase:
    """One phase's tags through a TagService, as Exchange would touch them."""

    def __init__(self, service: TagService, logic: PhaseLogic) -> None:
        self.service, self.logic = service, logic

    def path(self, key: str) -> str:
        return tag_path(self.logic.name, key)

    def write(self, key: str, value: float) -> None:
        self.service.write([self.path(key)], [value])

    def read(self, key: str) -> Any:
        found = self.service.read([self.path(key)])[0]
        assert found.quality.is_good, found
        return found.value

    def wait(self, key: str, value: float, timeout_s: float = 3.0) -> None:
        self.service.wait_for_value(self.path(key), value, timeout_s=timeout_s, poll_s=0.005)

    def command(self, number: int, then_state: int | None = None) -> None:
        """Write a command; wait for its acknowledge (0) and, when given, the state it leads to."""
        self.write("command", number)
        self.wait("command", 0)
        if then_state is not None:
            self.wait("state", then_state)


@pytest.fixture
def phase(phase_plc: Any) -> Iterator[Phase]:
    config = load_plant(phase_plc.config_toml(watchdog_period_ms=100))
    service = TagService.from_config(config)
    try:
        yield Phase(service, phase_plc.phase("R1/Charge"))
    finally:
        service.close()


def test_the_config_text_loads_as_a_gateway_checks_it(phase_plc: Any) -> None:
    config = load_plant(phase_plc.config_toml(owner_id=7, watchdog_period_ms=250))
    charge = config.phases["R1/Charge"]
    assert (charge.command, charge.state, charge.owner, charge.owner_id, charge.numbering) == (
        "[plant]R1/Charge/Command", "[plant]R1/Charge/State", "[plant]R1/Charge/Owner", 7, "pli")
    assert dict(charge.params) == {"target_l": "[plant]R1/Charge/Params/target_l"}
    assert dict(charge.reports) == {"actual_l": "[plant]R1/Charge/Reports/actual_l"}
    assert (config.watchdog.tag, config.watchdog.period_ms) == (HEARTBEAT_TAG, 250)


def test_start_runs_the_phase_to_complete_with_its_reports_and_reset_frees_it(phase: Phase) -> None:
    assert (phase.read("state"), phase.read("command"), phase.read("owner")) == (IDLE, 0, 0)
    phase.write("param:target_l", 3.0)
    phase.write("owner", 1)
    phase.command(START, then_state=RUNNING)
    phase.wait("state", COMPLETE)
    assert phase.read("report:actual_l") == pytest.approx(3.0)  # written before Complete showed
    assert (phase.logic.owner_at_start, phase.logic.params_at_start) == (1, {"target_l": 3.0})
    phase.command(RESET, then_state=IDLE)
    assert phase.read("owner") == 0  # the PLC frees the phase at Idle after Reset
    assert phase.logic.starts == 1 and phase.logic.acted == {"START": 1, "RESET": 1}


def test_hold_and_restart_and_time_held_does_not_count(phase: Phase) -> None:
    phase.logic.duration_s = 0.2
    phase.command(START, then_state=RUNNING)
    phase.command(HOLD, then_state=HELD)
    held_at = time.monotonic()
    assert phase.logic.states_seen[-2:] == ["HOLDING", "HELD"]
    assert holds_for(lambda: phase.read("state") == HELD, 0.3)  # longer than the duration: time held does not count
    phase.command(RESTART, then_state=RUNNING)
    assert "RESTARTING" in phase.logic.states_seen
    phase.wait("state", COMPLETE)
    assert time.monotonic() - held_at >= 0.3


@pytest.mark.parametrize(("command", "final"), [(STOP, STOPPED), (ABORT, ABORTED)])
def test_stop_and_abort_end_a_running_or_held_phase_and_reset_brings_it_back(
        phase: Phase, command: int, final: int) -> None:
    phase.logic.duration_s = 30
    for hold_first in (False, True):
        phase.command(START, then_state=RUNNING)
        if hold_first:
            phase.command(HOLD, then_state=HELD)
        phase.command(command, then_state=final)
        assert phase.read("report:actual_l") == 0.0  # no reports for a phase that did not complete
        phase.command(RESET, then_state=IDLE)
    assert phase.logic.acted[{STOP: "STOP", ABORT: "ABORT"}[command]] == 2


def test_a_command_the_state_does_not_take_is_ignored_and_still_acknowledged(phase: Phase) -> None:
    for number in (RESTART, HOLD, RESET, STOP, ABORT):
        phase.command(number)
    assert phase.read("state") == IDLE
    phase.logic.duration_s = 30
    phase.command(START, then_state=RUNNING)
    phase.command(START)  # a second Start: seen, counted, ignored
    phase.command(RESET)
    assert phase.read("state") == RUNNING
    assert phase.logic.starts == 2 and phase.logic.acted["START"] == 1
    assert phase.logic.ignored == [("RESTART", "IDLE"), ("HOLD", "IDLE"), ("RESET", "IDLE"), ("STOP", "IDLE"),
                                   ("ABORT", "IDLE"), ("START", "RUNNING"), ("RESET", "RUNNING")]


def test_every_write_of_a_command_is_a_command_even_the_same_number_twice(phase: Phase) -> None:
    phase.service.write([phase.path("command")], [START])
    phase.service.write([phase.path("command")], [START])  # very likely before the PLC's acknowledge
    wait_until(lambda: phase.logic.received["START"] == 2, 3)
    phase.wait("command", 0)
    assert phase.logic.acted["START"] == 1


def test_a_missing_permissive_keeps_the_phase_off_idle_until_given(phase: Phase) -> None:
    phase.logic.set_permissive(False)
    phase.wait("state", PERMISSIVE)
    phase.command(START)
    assert phase.read("state") == PERMISSIVE and phase.logic.acted["START"] == 0
    phase.logic.set_permissive(True)
    phase.wait("state", IDLE)
    phase.command(START, then_state=RUNNING)


def test_the_plc_holds_stops_and_aborts_by_itself(phase: Phase) -> None:
    phase.logic.duration_s = 30
    phase.command(START, then_state=RUNNING)
    assert phase.logic.hold()
    phase.wait("state", HELD)
    assert not phase.logic.hold()  # nothing to hold
    phase.command(RESTART, then_state=RUNNING)
    assert phase.logic.stop()
    phase.wait("state", STOPPED)
    phase.command(RESET, then_state=IDLE)
    phase.command(START, then_state=RUNNING)
    assert phase.logic.abort()
    phase.wait("state", ABORTED)
    assert phase.logic.plc_actions == {"HOLD": 1, "STOP": 1, "ABORT": 1}


def test_an_owner_the_plc_writes_is_seen_and_kept(phase: Phase) -> None:
    phase.logic.set_owner(42)
    phase.wait("owner", 42)
    phase.command(RESTART)  # a scan passes: the PLC does not clear an owner outside a Reset
    assert phase.read("owner") == 42


def test_a_heartbeat_standing_still_holds_a_running_phase_and_refuses_restart_until_it_beats(
        phase: Phase) -> None:
    logic = phase.logic
    logic.duration_s, logic.watchdog_period_ms, logic.watchdog_periods = 30, 50, 3
    beating = threading.Event()
    beating.set()
    done = threading.Event()

    def beat() -> None:  # the gateway's watchdog, every 50 ms while "alive"
        count = 0
        while not done.is_set():
            if beating.is_set():
                count += 1
                phase.write("heartbeat", count)
            done.wait(0.05)

    beater = threading.Thread(target=beat, name="test-heartbeat")
    beater.start()
    try:
        phase.command(START, then_state=RUNNING)
        assert holds_for(lambda: phase.read("state") == RUNNING, 0.25)  # longer than the watchdog's time
        beating.clear()
        stopped_at = time.monotonic()
        phase.wait("state", HELD, timeout_s=2)
        assert time.monotonic() - stopped_at >= 0.15 - 0.06  # 3 periods, less one beat's lateness
        assert logic.watchdog_holds == 1
        phase.command(RESTART)
        assert phase.read("state") == HELD  # no supervisor: no restart
        beating.set()
        wait_until(lambda: not logic.heartbeat_stale, 2)
        phase.command(RESTART, then_state=RUNNING)
    finally:
        done.set()
        beater.join(5)


def test_an_opcua_subscription_sees_every_state_on_the_way(phase_plc_opcua_server: OpcUaPhasePlc) -> None:
    plc = phase_plc_opcua_server
    plc.reset()
    service = TagService.from_config(load_plant(plc.config_toml()))
    phase = Phase(service, plc.phase())
    tag = phase.service.tag(phase.path("state"))
    seen: list[int] = []
    subscription = phase.service.driver(tag.device).subscribe(tag.point, lambda v: seen.append(v.value))
    try:
        phase.logic.duration_s = 0.2
        phase.command(START)
        phase.wait("state", COMPLETE)
        phase.command(RESET, then_state=IDLE)
        wait_until(lambda: seen[-1:] == [IDLE] and len(seen) >= 5, 2, message=lambda: f"seen {seen}")
    finally:
        subscription.cancel()
        service.close()
    assert [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]] == [IDLE, RUNNING, COMPLETE, 5, IDLE]


def test_a_packml_phase_runs_starting_execute_completing_complete_and_aborted_needs_clear() -> None:
    logic = PackmlPhase("R2/Transfer", params=(), reports={"moved_kg": 12.5}, duration_s=0.1, transition_ms=10)
    plc = ModbusPhasePlc([logic, PliPhase("R1/Charge")]).start()
    service = TagService.from_config(load_plant(plc.config_toml()))
    try:
        phase = Phase(service, logic)
        assert phase.read("state") == 4  # Idle
        phase.command(2)  # Start
        phase.wait("state", 17)  # Complete
        assert phase.read("report:moved_kg") == 12.5
        assert logic.states_seen == ["IDLE", "STARTING", "EXECUTE", "COMPLETING", "COMPLETE"]
        phase.command(1, then_state=4)  # Reset -> Idle
        phase.command(2, then_state=6)  # Start -> Execute
        phase.command(8, then_state=9)  # Abort -> Aborted
        phase.command(1)  # Reset: not from Aborted
        assert phase.read("state") == 9
        phase.command(9, then_state=2)  # Clear -> Stopped
        phase.command(1, then_state=4)  # Reset -> Idle
    finally:
        service.close()
        plc.stop()
