"""Shared by the phase tests: a simulated plant whose PLC runs a phase ``R1/Charge``
([simulation.phases]) over Modbus, an in-process engine configured to command it, and the fixtures of
the independent PLC of ``tests/phaseplc`` (``phase_plc``: once over OPC UA, once over Modbus)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simulators.engine import SimulatedPlant
from tests.phaseplc.fixtures import phase_plc, phase_plc_modbus_server, phase_plc_opcua_server  # noqa: F401
from tests.steps.conftest import StepEngine, make_engine  # noqa: F401

PHASE = "R1/Charge"
CMD, STATE, OWNER, TARGET, ACTUAL = ("[plant]R1/Charge/Command", "[plant]R1/Charge/State", "[plant]R1/Charge/Owner",
                                     "[plant]R1/Charge/Target", "[plant]R1/Charge/Actual")


def plant_document(numbering: str = "pli", owner: bool = True, **simulated: Any) -> dict[str, Any]:
    """A Modbus PLC with one phase; ``simulated`` overrides its [simulation.phases] keys."""
    tags = {CMD: {"device": "plc", "address": "HR1", "type": "Int16"},
            STATE: {"device": "plc", "address": "HR2", "type": "Int16"},
            TARGET: {"device": "plc", "address": "HRF10"},
            ACTUAL: {"device": "plc", "address": "HRF20"}}
    phase: dict[str, Any] = {"command": CMD, "state": STATE, "numbering": numbering,
                             "params": {"target_l": TARGET}, "reports": {"actual_l": ACTUAL},
                             "start_timeout_s": 5, "command_timeout_s": 5}
    if owner:
        tags[OWNER] = {"device": "plc", "address": "HR3", "type": "Int16"}
        phase["owner"] = OWNER
    return {
        "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1", "port": 502, "comm_timeout_s": 5}},
        "tags": tags,
        "phases": {PHASE: phase},
        "simulation": {"tick_ms": 20, "phases": {PHASE: {"duration_s": 0.6, "transition_ms": 60,
                                                         "reports": {"actual_l": 19.5}, **simulated}}},
    }


@pytest.fixture
def plant() -> Iterator[SimulatedPlant]:
    with SimulatedPlant.from_document(plant_document(), free_ports=True).start() as sim:
        yield sim


def sections_for(sim: SimulatedPlant) -> dict[str, Any]:
    """The config sections of an engine that commands ``sim``'s phase."""
    document = sim.config_document()
    return {key: document[key] for key in ("devices", "tags", "phases") if key in document}


@pytest.fixture
def phase_engine(plant: SimulatedPlant, make_engine: Callable[..., StepEngine]) -> StepEngine:  # noqa: F811
    return make_engine(**sections_for(plant))
