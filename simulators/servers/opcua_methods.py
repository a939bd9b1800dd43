"""Methods for the OPC UA simulator: an object with methods whose arguments are typed, as PLCs offer
them (load a recipe, acknowledge), served by :class:`simulators.servers.opcua.OpcUaSimServer`.

A :class:`SimMethod` names its object (``ns=2;s=Line1.Mixer``, an object node the simulator makes),
its browse name, its input and output arguments (:class:`SimArgument`: a data type, one-dimensional
arrays too) and a handler. The handler runs on the server's thread with the arguments as plain Python
values and a :class:`MethodScope` to read and change the server's points; it returns the outputs in
order, or raises :class:`MethodRefused` with an OPC UA status name (``BadOutOfRange``): the client
gets that status code, and the points are left as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from asyncua import ua
from asyncua.ua.object_ids import ObjectIds
from asyncua.ua.status_codes import StatusCodes

from exchange._values import DataType

_DATA_TYPE_IDS: dict[DataType, int] = {
    DataType.BOOLEAN: ObjectIds.Boolean,
    DataType.INT16: ObjectIds.Int16,
    DataType.UINT16: ObjectIds.UInt16,
    DataType.INT32: ObjectIds.Int32,
    DataType.UINT32: ObjectIds.UInt32,
    DataType.INT64: ObjectIds.Int64,
    DataType.FLOAT32: ObjectIds.Float,
    DataType.FLOAT64: ObjectIds.Double,
    DataType.STRING: ObjectIds.String,
}


class MethodRefused(Exception):
    """Raised by a handler: the call is answered with the OPC UA status ``status`` (a name)."""

    def __init__(self, status: str, message: str = "") -> None:
        if not hasattr(StatusCodes, status):
            raise ValueError(f"{status!r} is not an OPC UA status code name")
        super().__init__(message or status)
        self.status = status


class MethodScope(Protocol):
    """What a handler may touch: the server's points by address, as the PLC program would."""

    def get(self, address: str) -> Any: ...

    def set(self, address: str, value: Any) -> None: ...


Handler = Callable[[MethodScope, list[Any]], Sequence[Any]]


@dataclass(frozen=True)
class SimArgument:
    name: str
    data_type: DataType
    array: bool = False

    def argument(self) -> ua.Argument:
        """The ua.Argument the method's InputArguments/OutputArguments property lists."""
        if self.data_type not in _DATA_TYPE_IDS:
            raise ValueError(f"argument {self.name!r}: data type {self.data_type} is not supported")
        arg = ua.Argument()
        arg.Name = self.name
        arg.DataType = ua.NodeId(ua.Int32(_DATA_TYPE_IDS[self.data_type]))
        arg.ValueRank = 1 if self.array else -1
        arg.ArrayDimensions = [0] if self.array else []
        return arg


@dataclass(frozen=True)
class SimMethod:
    object_address: str  # NodeId of the object the method belongs to, ns=2 (the simulator's namespace)
    name: str  # browse name, e.g. "SetSpeed"; the method's NodeId is the object's string id + "." + name
    inputs: tuple[SimArgument, ...]
    outputs: tuple[SimArgument, ...]
    handler: Handler
