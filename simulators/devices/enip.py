"""EtherNet/IP devices (``driver = "enip"``) served as a Logix controller by
:class:`simulators.servers.enip.EnipSimServer` (cpppo, in a child process per device).

Addresses are parsed by the driver's own parser (:func:`exchange._drivers.enip.tags.
parse_logix_address`). cpppo serves scalars and one-dimensional arrays (``Arr[3]``: the array gets
as many elements as the highest index used); a member name (``Motor.Speed``) is served as a tag of
that name, which answers the same requests. cpppo cannot list its tags, so the written config sets
``upload_tags = false`` and gives every tag its ``type``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.enip.settings import EnipSettings
from exchange._drivers.enip.tags import LOGIX_TYPES, parse_logix_address
from exchange._values import DataType
from exchange.errors import TagError
from simulators.devices.base import Endpoint, ServedMethod, Slot, UnservableError, require_types
from simulators.servers.base import SimPoint, SimServer

_INFERRED = {bool: DataType.BOOLEAN, int: DataType.INT32, float: DataType.FLOAT32, str: DataType.STRING}


class EnipKind:
    driver = "enip"
    arrays = False
    methods = False

    def endpoint(self, device: DeviceConfig) -> Endpoint:
        settings = EnipSettings.from_device(device)
        return Endpoint(settings.host, settings.port)

    def slot(self, device: DeviceConfig, address: str, data_type: DataType | None) -> Slot:
        try:
            parsed = parse_logix_address(address)
        except TagError as exc:
            raise UnservableError(str(exc)) from exc
        if any(member.indices for member in parsed.members[:-1]):
            raise UnservableError("the simulated controller serves an index on the last name only")
        indices = parsed.members[-1].indices
        if len(indices) > 1:
            raise UnservableError("the simulated controller serves one-dimensional arrays only")
        base = address.split("[", 1)[0]
        return Slot(key=address, group=(base.casefold(), "array" if indices else "scalar"))

    def infer_type(self, value: bool | int | float | str) -> DataType:
        return _INFERRED[type(value)]

    def check_type(self, data_type: DataType) -> None:
        require_types("EtherNet/IP", data_type, list(LOGIX_TYPES))

    def server(self, device: DeviceConfig, points: Sequence[SimPoint], host: str, port: int,
               methods: Sequence[ServedMethod] = ()) -> SimServer:
        from simulators.servers.enip import EnipSimServer

        try:
            return EnipSimServer(list(points), host=host, port=port)
        except ValueError as exc:
            raise UnservableError(str(exc)) from exc

    def device_out(self, table: Mapping[str, Any], configured: Endpoint, host: str, port: int,
                   server: SimServer) -> dict[str, Any]:
        return {**table, "host": host, "port": port, "upload_tags": False}

    def tag_out(self, table: Mapping[str, Any], data_type: DataType) -> dict[str, Any]:
        return {**table, "type": table.get("type", data_type.value)}


KIND = EnipKind()
