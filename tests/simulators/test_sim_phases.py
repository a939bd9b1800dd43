"""[simulation.phases]: the simulator plays the PLC side of a phase. Commands written over Modbus by
Exchange's own tag service are taken (the command tag goes back to 0), transients last
transition_ms, the phase runs duration_s (not while held) and writes its reports at Complete; a
command its state does not allow is ignored; PackML numbers; a stale watchdog holds a running phase;
a test makes the PLC hold or abort by itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange.errors import ConfigError
from simulators.engine import SimulatedPlant
from tests.waiting import wait_until

CMD, STATE, TARGET, ACTUAL, BEAT = ("[plant]R1/Charge/Command", "[plant]R1/Charge/State", "[plant]R1/Charge/Target",
                                    "[plant]R1/Charge/Actual", "[plant]Exchange/Heartbeat")


def document(numbering: str = "pli", watchdog: bool = False, **simulated: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1", "port": 502}},
        "tags": {CMD: {"device": "plc", "address": "HR1", "type": "Int16"},
                 STATE: {"device": "plc", "address": "HR2", "type": "Int16"},
                 TARGET: {"device": "plc", "address": "HRF10"},
                 ACTUAL: {"device": "plc", "address": "HRF20"},
                 BEAT: {"device": "plc", "address": "HR30", "type": "Int16"}},
        "phases": {"R1/Charge": {"command": CMD, "state": STATE, "numbering": numbering,
                                 "params": {"target_l": TARGET}, "reports": {"actual_l": ACTUAL}}},
        "simulation": {"tick_ms": 50, "phases": {"R1/Charge": {"duration_s": 2, "transition_ms": 200,
                                                               "reports": {"actual_l": 19.5}, **simulated}}},
    }
    if watchdog:
        doc["watchdog"] = {"tag": BEAT, "period_ms": 200}
    return doc


@pytest.fixture
def sim() -> Iterator[SimulatedPlant]:
    with SimulatedPlant.from_document(document(), free_ports=True).start(ticker=False) as plant:
        yield plant


def test_a_pli_phase_runs_holds_restarts_completes_and_resets(sim: SimulatedPlant) -> None:
    assert sim.read(STATE) == 1  # IDLE
    sim.write(CMD, 1)  # Start
    sim.advance(0.05)
    assert (sim.read(CMD), sim.read(STATE)) == (0, 2)  # taken (acknowledged with 0), RUNNING
    sim.advance(1.0)
    sim.write(CMD, 4)  # Hold
    sim.advance(0.1)
    assert sim.read(STATE) == 8  # HOLDING for transition_ms
    sim.advance(0.15)
    assert sim.read(STATE) == 9  # HELD
    sim.advance(10)  # held time does not count toward duration_s
    assert sim.read(STATE) == 9
    sim.write(CMD, 7)  # Reset: not allowed while HELD, ignored as a PLC would
    sim.advance(0.05)
    assert (sim.read(CMD), sim.read(STATE)) == (0, 9)
    sim.write(CMD, 5)  # Restart
    sim.advance(0.25)
    assert sim.read(STATE) == 2 and sim.read(ACTUAL) == 0.0
    sim.advance(1.0)  # 1 s ran before the hold, 1 s now: Complete, reports written
    assert sim.read(STATE) == 3 and sim.read(ACTUAL) == pytest.approx(19.5)
    sim.write(CMD, 7)  # Reset
    sim.advance(0.3)
    assert sim.read(STATE) == 1
    assert sim.phase_commands("R1/Charge") == ["START", "HOLD", "RESTART", "RESET"]


def test_stop_abort_and_what_the_plc_does_by_itself(sim: SimulatedPlant) -> None:
    sim.write(CMD, 1)
    sim.advance(0.1)
    sim.command_phase("R1/Charge", "HOLD")  # the PLC holds on its own (a jammed valve)
    sim.advance(0.3)
    assert sim.phase_state("R1/Charge") == "HELD"
    sim.write(CMD, 6)  # Stop
    sim.advance(0.3)
    assert sim.read(STATE) == 11  # STOPPED
    sim.write(CMD, 7)
    sim.advance(0.3)
    sim.write(CMD, 1)
    sim.advance(0.1)
    sim.command_phase("R1/Charge", "ABORT")
    sim.advance(0.3)
    assert sim.read(STATE) == 13  # ABORTED


def test_packml_numbers_and_its_transients() -> None:
    with SimulatedPlant.from_document(document("packml"), free_ports=True).start(ticker=False) as sim:
        assert sim.read(STATE) == 4  # Idle
        sim.write(CMD, 2)  # Start
        sim.advance(0.1)
        assert sim.read(STATE) == 3  # Starting
        sim.advance(0.15)
        assert sim.read(STATE) == 6  # Execute
        sim.advance(2.0)
        assert sim.read(STATE) == 16  # Completing
        sim.advance(0.25)
        assert sim.read(STATE) == 17 and sim.read(ACTUAL) == pytest.approx(19.5)  # Complete


def test_a_stale_watchdog_holds_a_running_phase() -> None:
    with SimulatedPlant.from_document(document(watchdog=True), free_ports=True).start(ticker=False) as sim:
        sim.write(CMD, 1)
        for beat in range(1, 6):  # the supervisor beats every 200 ms
            sim.write(BEAT, beat)
            sim.advance(0.2)
        assert sim.phase_state("R1/Charge") == "RUNNING"
        sim.advance(0.65)  # three periods without a beat
        assert sim.phase_state("R1/Charge") in ("HOLDING", "HELD")


def test_exchange_s_own_tag_service_commands_the_phase_over_modbus(tmp_path: Path) -> None:
    with SimulatedPlant.from_document(document(), free_ports=True).start() as sim:  # the ticker runs
        service = TagService(config_from_dict(sim.config_document(), env={}))
        try:
            service.write([TARGET, CMD], [20.0, 1])
            wait_until(lambda: service.read([STATE])[0].value == 2, 10, message="RUNNING")
            wait_until(lambda: service.read([STATE])[0].value == 3, 10, message="COMPLETE")
            assert service.read([ACTUAL])[0].value == pytest.approx(19.5)
            assert service.read([CMD])[0].value == 0
        finally:
            service.close()


@pytest.mark.parametrize(("change", "message"), [
    ({"duration": 1}, "unknown key"),
    ({"duration_s": 0}, "duration_s must be a number of seconds above 0"),
    ({"transition_ms": -1}, "transition_ms must be an integer from 0 to 600000"),
    ({"reports": {"level": 1}}, "reports.level: the phase has no such report (its reports: actual_l)"),
])
def test_a_mistake_names_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict(document(**change), env={})


def test_a_simulated_phase_needs_a_configured_one() -> None:
    doc = document()
    doc["simulation"]["phases"]["R2/Heat"] = {}
    with pytest.raises(ConfigError, match=r'no \[phases."R2/Heat"\] to play \(configured: R1/Charge\)'):
        config_from_dict(doc, env={})
