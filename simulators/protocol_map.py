"""Where each plant point lives on each protocol, and which protocol serves which plant area.

Every point has an address on every protocol (one mapping per protocol, below), so any area can be
served by any protocol. By default the plant is split so one demo exercises all three drivers:

    Tank   (level, inlet and outlet valves)   Modbus TCP
    Mixer  (run command, feedback, speed)     OPC UA
    Heater (enable, setpoint, temperature)    EtherNet/IP (Logix)

When a protocol is left out, its areas go to the first chosen protocol, so ``--protocols opcua`` serves
the whole plant over OPC UA. One point is served by exactly one server: the plant has one owner per
value, and the printed config maps each tag path to exactly one device.

Modbus addresses (1-based, unit 1, big-endian word order)::

    C1  Tank/InletValve/Cmd     DI1 Tank/InletValve/Open    IRF1 Tank/Level (IR1-2)
    C2  Tank/OutletValve/Cmd    DI2 Tank/OutletValve/Open   IRF3 Heater/Temperature (IR3-4)
    C3  Mixer/RunCmd            DI3 Mixer/Running           HR1  Mixer/Speed
    C4  Heater/Enable           DI4 Mixer/Fault             HRF2 Heater/Setpoint (HR2-3)

OPC UA: ``ns=2;s=Line1.Tank.Level`` (the path with dots; ns=2 is the server's first namespace),
endpoint ``opc.tcp://HOST:PORT/plant/``. Logix: the path after ``Line1/`` with underscores
(``Tank_Level``, ``Tank_InletValve_Cmd``), controller-scoped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from exchange._values import DataType
from simulators.plant import AREAS, LINE, POINTS, PlantPoint

PROTOCOLS = ("modbus", "opcua", "enip")
PREFERRED_PROTOCOL: dict[str, str] = {"Tank": "modbus", "Mixer": "opcua", "Heater": "enip"}
OPCUA_ENDPOINT_PATH = "/plant/"
MODBUS_UNIT_ID = 1

_MODBUS: dict[str, str] = {
    f"{LINE}/Tank/InletValve/Cmd": "C1",
    f"{LINE}/Tank/OutletValve/Cmd": "C2",
    f"{LINE}/Mixer/RunCmd": "C3",
    f"{LINE}/Heater/Enable": "C4",
    f"{LINE}/Tank/InletValve/Open": "DI1",
    f"{LINE}/Tank/OutletValve/Open": "DI2",
    f"{LINE}/Mixer/Running": "DI3",
    f"{LINE}/Mixer/Fault": "DI4",
    f"{LINE}/Tank/Level": "IRF1",
    f"{LINE}/Heater/Temperature": "IRF3",
    f"{LINE}/Mixer/Speed": "HR1",
    f"{LINE}/Heater/Setpoint": "HRF2",
}

LOGIX_TYPES: dict[DataType, str] = {
    DataType.BOOLEAN: "BOOL",
    DataType.INT16: "INT",
    DataType.INT32: "DINT",
    DataType.FLOAT32: "REAL",
    DataType.FLOAT64: "LREAL",
}


def address(protocol: str, path: str) -> str:
    """The address of plant point ``path`` on ``protocol``, written as in an Exchange config."""
    if protocol == "modbus":
        return _MODBUS[path]
    if protocol == "opcua":
        return "ns=2;s=" + path.replace("/", ".")
    if protocol == "enip":
        return path.removeprefix(f"{LINE}/").replace("/", "_")
    raise ValueError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")


def parse_protocols(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"modbus,opcua"`` (or a list) → a tuple of known protocols, duplicates removed, order kept."""
    items = text.split(",") if isinstance(text, str) else list(text)
    chosen: list[str] = []
    for raw in items:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in PROTOCOLS:
            raise ValueError(f"unknown protocol {raw.strip()!r}: expected one of {', '.join(PROTOCOLS)}")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise ValueError(f"no protocol chosen: expected one or more of {', '.join(PROTOCOLS)}")
    return tuple(chosen)


def assign_areas(protocols: Sequence[str]) -> dict[str, str]:
    """Area → serving protocol: the area's preferred protocol when chosen, else the first chosen one."""
    chosen = parse_protocols(protocols)
    return {area: PREFERRED_PROTOCOL[area] if PREFERRED_PROTOCOL[area] in chosen else chosen[0]
            for area in AREAS}


def points_served(protocol: str, assignment: Mapping[str, str]) -> list[PlantPoint]:
    """The plant points ``protocol`` serves under ``assignment``, in catalogue order."""
    return [p for p in POINTS if assignment[p.area] == protocol]


def logix_type(point: PlantPoint) -> str:
    return LOGIX_TYPES[point.data_type]
