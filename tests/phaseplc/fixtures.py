"""Pytest fixtures of the phase PLCs; import them into a test module or a conftest.py to use them:

    from tests.phaseplc.fixtures import phase_plc, phase_plc_modbus_server, phase_plc_opcua_server  # noqa: F401

``phase_plc`` is parametrized over both protocols: a test taking it runs once against the OPC UA PLC
and once against the Modbus PLC, each serving one PLI phase ``R1/Charge`` (param ``target_l``,
report ``actual_l`` = the target it started with; runs 0.3 s, transient states 20 ms), reset to Idle
with every tag 0 and its counters empty. The servers are module-scoped (an asyncua server takes
~1.5 s to start) and stopped at the module's end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.phaseplc.logic import PliPhase
from tests.phaseplc.modbus_phase import ModbusPhasePlc
from tests.phaseplc.opcua_phase import OpcUaPhasePlc

PhasePlc = OpcUaPhasePlc | ModbusPhasePlc


def default_phase() -> PliPhase:
    return PliPhase("R1/Charge", params=("target_l",), duration_s=0.3, transition_ms=20)


@pytest.fixture(scope="module")
def phase_plc_opcua_server() -> Iterator[OpcUaPhasePlc]:
    plc = OpcUaPhasePlc([default_phase()]).start()
    try:
        yield plc
    finally:
        plc.stop()


@pytest.fixture(scope="module")
def phase_plc_modbus_server() -> Iterator[ModbusPhasePlc]:
    plc = ModbusPhasePlc([default_phase()]).start()
    try:
        yield plc
    finally:
        plc.stop()


@pytest.fixture(params=["opcua", "modbus"])
def phase_plc(request: pytest.FixtureRequest) -> Any:
    """The module's PLC of one protocol, reset; ``request.param`` names the protocol."""
    plc: PhasePlc = request.getfixturevalue(f"phase_plc_{request.param}_server")
    plc.reset()
    return plc
