"""The Exchange config (TOML text) that matches a running simulated plant.

One ``[devices.sim_<protocol>]`` table per serving protocol, with the real host and port, and one
``[tags."[plant]Line1/..."]`` table per plant point on the device that serves it: ``access = "ro"`` for
process values, ``min``/``max`` where the point has a range, and for EtherNet/IP ``upload_tags = false``
plus each tag's Logix ``type`` (cpppo cannot list its tags). A Modbus device on RTU gets the keys its
server gives (``transport``, ``serial_port``, ``baudrate``) instead of the host and port; the OPC UA
device, when it serves the mixer, also gets the tags of :mod:`simulators.opcua_extras`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from simulators.opcua_extras import extra_tag_lines
from simulators.plant import POINTS, PlantPoint
from simulators.protocol_map import (
    MODBUS_UNIT_ID,
    OPCUA_ENDPOINT_PATH,
    PROTOCOLS,
    address,
    logix_type,
)


def device_name(protocol: str) -> str:
    """The config's device name for the server of ``protocol`` (``sim_modbus``, ...)."""
    return f"sim_{protocol}"


def _q(text: str) -> str:
    # A TOML basic string; JSON's escaping is a subset TOML accepts for these ASCII names.
    return json.dumps(text)


def _number(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


def _value(value: Any) -> str:
    return _q(value) if isinstance(value, str) else repr(value)


def _device_lines(protocol: str, host: str, port: int, settings: Mapping[str, Any] | None = None) -> list[str]:
    lines = [f"[devices.{device_name(protocol)}]", f"driver = {_q(protocol)}"]
    if protocol == "opcua":
        lines.append(f"url = {_q(f'opc.tcp://{host}:{port}{OPCUA_ENDPOINT_PATH}')}")
    elif settings and settings.get("transport") == "serial":
        lines += [f"{key} = {_value(value)}" for key, value in settings.items()]
    else:
        if settings and "transport" in settings:
            lines.append(f"transport = {_q(settings['transport'])}")
        lines += [f"host = {_q(host)}", f"port = {port}"]
    if protocol == "modbus":
        lines += [f"unit_id = {MODBUS_UNIT_ID}", "zero_based = false", 'word_order = "big"']
    if protocol == "enip":
        lines += ["slot = 0", "upload_tags = false"]
    return lines


def _tag_lines(point: PlantPoint, protocol: str, provider: str) -> list[str]:
    lines = [
        f"[tags.{_q(f'[{provider}]{point.path}')}]",
        f"device = {_q(device_name(protocol))}",
        f"address = {_q(address(protocol, point.path))}",
        f"access = {_q('rw' if point.writable else 'ro')}",
    ]
    if protocol == "enip":
        lines.append(f"type = {_q(logix_type(point))}")
    if point.writable and point.min_value is not None:
        lines.append(f"min = {_number(point.min_value)}")
    if point.writable and point.max_value is not None:
        lines.append(f"max = {_number(point.max_value)}")
    return lines


def render_config(host: str, ports: Mapping[str, int], assignment: Mapping[str, str],
                  provider: str = "plant", device_settings: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """TOML text for the plant served on ``host`` at ``ports`` (protocol → port) under ``assignment``.

    Every protocol in ``assignment``'s values must have a port in ``ports``. A wildcard ``host``
    (``0.0.0.0``) is written as ``127.0.0.1``. ``device_settings``: protocol → the keys its server
    gives (:meth:`simulators.servers.modbus.ModbusSimServer.client_settings`).
    """
    if host in ("", "0.0.0.0"):  # listening everywhere: clients on this machine use the loopback
        host = "127.0.0.1"
    serving = [p for p in PROTOCOLS if p in set(assignment.values())]
    missing = [p for p in serving if p not in ports]
    if missing:
        raise ValueError(f"no port for the {', '.join(missing)} server of the simulated plant")
    areas = ", ".join(f"{area} on {proto}" for area, proto in assignment.items())
    blocks: list[list[str]] = [[
        "# Exchange config for the simulated plant (exchange simulate)",
        f"# {areas}",
    ]]
    settings = device_settings or {}
    blocks += [_device_lines(proto, host, int(ports[proto]), settings.get(proto)) for proto in serving]
    blocks += [_tag_lines(point, assignment[point.area], provider) for point in POINTS]
    if assignment.get("Mixer") == "opcua":
        blocks += extra_tag_lines(device_name("opcua"), provider)
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
