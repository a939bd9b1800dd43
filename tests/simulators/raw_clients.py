"""Independent clients for the simulated plant: the protocols' own libraries, not Exchange's drivers.

Each reads and writes plant points by path, through the address the plant's config gives them, so a
test checks the plant as any third-party client would see it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from simulators.plant import POINTS_BY_PATH
from simulators.protocol_map import MODBUS_UNIT_ID, OPCUA_ENDPOINT_PATH, address

_MODBUS = re.compile(r"^(C|DI|IR|HR)(F?)(\d+)$")


class RawClient(Protocol):
    def read(self, path: str) -> Any: ...

    def write(self, path: str, value: Any) -> None: ...

    def close(self) -> None: ...


class RawModbus:
    def __init__(self, host: str, port: int) -> None:
        from pymodbus.client import ModbusTcpClient

        self.client = ModbusTcpClient(host, port=port, timeout=3, retries=0)
        if not self.client.connect():  # type: ignore[no-untyped-call]
            raise ConnectionError(f"modbus {host}:{port} refused the connection")

    def _parse(self, path: str) -> tuple[str, bool, int]:
        match = _MODBUS.match(address("modbus", path))
        assert match is not None
        return match.group(1), bool(match.group(2)), int(match.group(3)) - 1

    def read(self, path: str) -> Any:
        table, is_float, offset = self._parse(path)
        count = 2 if is_float else 1
        reader = {"C": self.client.read_coils, "DI": self.client.read_discrete_inputs,
                  "IR": self.client.read_input_registers, "HR": self.client.read_holding_registers}[table]
        response = reader(offset, count=count, device_id=MODBUS_UNIT_ID)
        if response.isError():
            raise RuntimeError(f"modbus read of {path} failed: {response}")
        if table in ("C", "DI"):
            return bool(response.bits[0])
        if is_float:
            return self.client.convert_from_registers(list(response.registers), self.client.DATATYPE.FLOAT32)
        return self.client.convert_from_registers(list(response.registers), self.client.DATATYPE.INT16)

    def write(self, path: str, value: Any) -> None:
        table, is_float, offset = self._parse(path)
        if table == "C":
            response = self.client.write_coil(offset, bool(value), device_id=MODBUS_UNIT_ID)
        elif table == "HR":
            kind = self.client.DATATYPE.FLOAT32 if is_float else self.client.DATATYPE.INT16
            registers = self.client.convert_to_registers(value, kind)
            response = self.client.write_registers(offset, registers, device_id=MODBUS_UNIT_ID)
        else:
            raise AssertionError(f"{path} is not writable over modbus")
        if response.isError():
            raise RuntimeError(f"modbus write of {path} failed: {response}")

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]


class RawOpcUa:
    def __init__(self, host: str, port: int) -> None:
        from asyncua.sync import Client

        self.client = Client(f"opc.tcp://{host}:{port}{OPCUA_ENDPOINT_PATH}", timeout=5)
        self.client.connect()

    def read(self, path: str) -> Any:
        return self.client.get_node(address("opcua", path)).read_value()

    def write(self, path: str, value: Any) -> None:
        from asyncua import ua

        variant = {"Boolean": ua.VariantType.Boolean, "Int16": ua.VariantType.Int16,
                   "Float32": ua.VariantType.Float}[POINTS_BY_PATH[path].data_type.value]
        self.client.get_node(address("opcua", path)).write_value(ua.DataValue(ua.Variant(value, variant)))

    def close(self) -> None:
        tloop = self.client.tloop
        try:
            tloop.post(self.client.aio_obj.disconnect())
            assert tloop.loop is not None
            tloop.post(tloop.loop.shutdown_default_executor())  # else an executor thread stays behind
        finally:
            tloop.stop()


class RawLogix:
    def __init__(self, host: str, port: int) -> None:
        from pylogix import PLC

        self.plc = PLC(host, port=port, timeout=5.0)

    def read(self, path: str) -> Any:
        response = self.plc.Read(address("enip", path))
        if response.Status != "Success":
            raise RuntimeError(f"logix read of {path} failed: {response.Status}")
        return response.Value

    def write(self, path: str, value: Any) -> None:
        response = self.plc.Write(address("enip", path), value)
        if response.Status != "Success":
            raise RuntimeError(f"logix write of {path} failed: {response.Status}")

    def close(self) -> None:
        self.plc.Close()


def connect(protocol: str, host: str, port: int) -> RawClient:
    """A raw client for ``protocol`` on ``host:port``."""
    factories: dict[str, Callable[[str, int], RawClient]] = {
        "modbus": RawModbus, "opcua": RawOpcUa, "enip": RawLogix}
    return factories[protocol](host, port)
