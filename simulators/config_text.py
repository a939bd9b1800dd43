"""The demo line's Exchange config: devices, tags and ``[simulation]``, for a split over protocols.

One ``[devices.sim_<protocol>]`` table per serving protocol, with the host and port, and one
``[tags."[plant]Line1/..."]`` table per plant point on the device that serves it: ``access = "ro"``
for process values, ``min``/``max`` where the point has a range, and for EtherNet/IP ``upload_tags =
false`` plus each tag's Logix ``type`` (cpppo cannot list its tags). ``[simulation]`` makes the valve
and mixer feedbacks ``follows`` of their commands (delays from :class:`simulators.plant.PlantParams`),
gives the initial values and names the model, :mod:`simulators.plant`. When OPC UA serves the Mixer,
the OPC UA device also has the array and the method of :mod:`simulators.opcua_extras`. The Modbus
device has the ``modbus_transport`` asked for: ``"tcp"``, ``"rtu-over-tcp"`` (``transport`` beside
host and port) or ``"serial"`` (``transport``, ``serial_port`` and ``baudrate`` instead: the
simulator replaces the port with the end of its pty pair). Served by the same simulator as any config
(``exchange simulate --from-config`` serves this text just the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulators.config_out import dumps
from simulators.opcua_extras import extra_simulation, extra_tags
from simulators.plant import FOLLOWS, POINTS, PlantParams, PlantPoint, tag
from simulators.protocol_map import (
    MODBUS_UNIT_ID,
    OPCUA_ENDPOINT_PATH,
    PROTOCOLS,
    address,
    logix_type,
)

MODEL = "simulators.plant"
TICK_MS = 100
MODBUS_TRANSPORTS = ("tcp", "rtu-over-tcp", "serial")
SERIAL_PORT = "/dev/ttySIM0"  # written until the simulator has linked its pty pair
SERIAL_BAUDRATE = 19200


def device_name(protocol: str) -> str:
    """The config's device name for the server of ``protocol`` (``sim_modbus``, ...)."""
    return f"sim_{protocol}"


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def _device(protocol: str, host: str, port: int, modbus_transport: str = "tcp") -> dict[str, Any]:
    table: dict[str, Any] = {"driver": protocol}
    if protocol == "opcua":
        table["url"] = f"opc.tcp://{host}:{port}{OPCUA_ENDPOINT_PATH}"
    elif protocol == "modbus" and modbus_transport == "serial":
        table.update(transport="serial", serial_port=SERIAL_PORT, baudrate=SERIAL_BAUDRATE)
    else:
        if protocol == "modbus" and modbus_transport != "tcp":
            table["transport"] = modbus_transport
        table.update(host=host, port=port)
    if protocol == "modbus":
        table.update(unit_id=MODBUS_UNIT_ID, zero_based=False, word_order="big")
    if protocol == "enip":
        table.update(slot=0, upload_tags=False)
    return table


def _tag(point: PlantPoint, protocol: str) -> dict[str, Any]:
    table: dict[str, Any] = {"device": device_name(protocol), "address": address(protocol, point.path),
                             "access": "rw" if point.writable else "ro"}
    if protocol == "enip":
        table["type"] = logix_type(point)
    if point.writable and point.min_value is not None:
        table["min"] = _number(point.min_value)
    if point.writable and point.max_value is not None:
        table["max"] = _number(point.max_value)
    return table


def _simulation(params: PlantParams, tick_ms: int, assignment: Mapping[str, str]) -> dict[str, Any]:
    tags: dict[str, dict[str, Any]] = {}
    for point in POINTS:
        if assignment[point.area] == "opcua":  # its tags have no type: the node says it
            tags[tag(point.path)] = {"type": point.data_type.value}
    for path, value in params.initial_values().items():
        if value:
            tags.setdefault(tag(path), {})["initial"] = value
    for feedback, (command, delay_field) in FOLLOWS.items():
        tags.setdefault(tag(feedback), {}).update(follows=tag(command),
                                                  delay_ms=round(getattr(params, delay_field) * 1000))
    if assignment["Mixer"] == "opcua":
        tags.update(extra_simulation())
    return {"tick_ms": tick_ms, "model": MODEL, "tags": tags}


def line1_document(host: str, ports: Mapping[str, int], assignment: Mapping[str, str],
                   params: PlantParams | None = None, tick_ms: int = TICK_MS,
                   modbus_transport: str = "tcp") -> dict[str, Any]:
    """The demo's config as a TOML document, served on ``host`` at ``ports`` (protocol -> port)
    with areas split by ``assignment`` (area -> protocol), Modbus on ``modbus_transport``. A
    wildcard ``host`` is written as 127.0.0.1. ValueError naming a protocol without a port, or an
    unknown transport."""
    if modbus_transport not in MODBUS_TRANSPORTS:
        raise ValueError(f"unknown modbus transport {modbus_transport!r}: expected one of "
                         f"{', '.join(MODBUS_TRANSPORTS)}")
    if host in ("", "0.0.0.0"):  # listening everywhere: clients on this machine use the loopback
        host = "127.0.0.1"
    serving = [p for p in PROTOCOLS if p in set(assignment.values())]
    missing = [p for p in serving if p not in ports]
    if missing:
        raise ValueError(f"no port for the {', '.join(missing)} server of the simulated plant")
    tags = {tag(point.path): _tag(point, assignment[point.area]) for point in POINTS}
    if assignment["Mixer"] == "opcua":
        tags.update(extra_tags(device_name("opcua")))
    return {
        "devices": {device_name(proto): _device(proto, host, int(ports[proto]), modbus_transport) for proto in serving},
        "tags": tags,
        "simulation": _simulation(params or PlantParams(), tick_ms, assignment),
    }


def header(assignment: Mapping[str, str]) -> str:
    areas = ", ".join(f"{area} on {proto}" for area, proto in assignment.items())
    return f"Exchange config for the simulated plant (exchange simulate)\n{areas}"


def render_config(host: str, ports: Mapping[str, int], assignment: Mapping[str, str],
                  params: PlantParams | None = None, modbus_transport: str = "tcp") -> str:
    """:func:`line1_document` as TOML text (see there)."""
    return dumps(line1_document(host, ports, assignment, params, modbus_transport=modbus_transport),
                 header(assignment))
