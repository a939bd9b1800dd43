"""The protocols the config-driven simulator serves: ``driver`` name -> its :class:`~simulators.
devices.base.DeviceKind`, imported on first use (a plant without OPC UA devices never loads asyncua).

A new protocol is a module with a ``KIND`` object and one line in :data:`KINDS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from simulators.devices.base import DeviceKind, UnservableError

KINDS: Mapping[str, str] = {
    "modbus": "simulators.devices.modbus",
    "opcua": "simulators.devices.opcua",
    "enip": "simulators.devices.enip",
}


def kind_of(driver: str) -> DeviceKind:
    """The kind serving ``driver``; UnservableError for a driver the simulator does not serve."""
    module = KINDS.get(driver)
    if module is None:
        raise UnservableError(f"the simulator does not serve driver {driver!r} (it serves {', '.join(KINDS)})")
    kind: DeviceKind = importlib.import_module(module).KIND
    return kind
