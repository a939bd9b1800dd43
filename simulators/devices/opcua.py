"""OPC UA devices (``driver = "opcua"``) served by :class:`simulators.servers.opcua.OpcUaSimServer`.

Node ids are served exactly as the tags write them, parsed by the driver's own parser
(:func:`exchange._drivers.opcua.values.parse_node_id`). ``ns=2`` is the first namespace the server
registers; a device whose tags use ``ns=3`` (or more) gets as many namespaces, and ``nsu=URI;...``
addresses register their URIs first, in the order the tags name them. ns=0 (the standard namespace)
and ns=1 (the server's own) hold no simulated variables.

Array tags are served as one-dimensional arrays; a tag with ``[simulation.tags."PATH".methods]`` is
an object (its address a string node id) with those methods, answered by the plant (the engine).

The server offers no security: the written config (``--config-out``) drops the device's security
and user keys, so the gateway connects the way the simulator serves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from exchange._config import DeviceConfig
from exchange._drivers.opcua.settings import parse_settings
from exchange._drivers.opcua.values import parse_node_id
from exchange._values import DataType
from exchange.errors import TagError
from simulators.devices.base import Endpoint, ServedMethod, Slot, UnservableError
from simulators.servers.base import SimPoint, SimServer

FIRST_NAMESPACE = 2
SECURITY_KEYS = ("security_policy", "security_mode", "certificate", "private_key", "private_key_password",
                 "server_certificate", "username", "password")
_INFERRED = {bool: DataType.BOOLEAN, int: DataType.INT32, float: DataType.FLOAT64, str: DataType.STRING}


def namespaces(device: str, addresses: Sequence[str]) -> list[str]:
    """The namespace URIs to register as ns=2, ns=3, ... so that every address resolves."""
    uris: list[str] = []
    highest = FIRST_NAMESPACE
    for address in addresses:
        parsed = parse_node_id(address)
        if parsed.namespace_uri is not None:
            if parsed.namespace_uri not in uris:
                uris.append(parsed.namespace_uri)
        else:
            highest = max(highest, parsed.node_id.NamespaceIndex)
    while len(uris) < highest - FIRST_NAMESPACE + 1:
        uris.append(f"urn:exchange:simulator:{device}:ns{FIRST_NAMESPACE + len(uris)}")
    return uris


def _handler(method: ServedMethod) -> Callable[[Any, list[Any]], Sequence[Any]]:
    def handle(scope: Any, args: list[Any]) -> Sequence[Any]:  # the plant, not the server's scope, answers
        return method.answer(args)

    return handle


class OpcUaKind:
    driver = "opcua"
    arrays = True
    methods = True

    def endpoint(self, device: DeviceConfig) -> Endpoint:
        settings = parse_settings(device)
        parts = urlsplit(settings.url)
        return Endpoint(parts.hostname or "127.0.0.1", parts.port or 4840, parts.path or "/")

    def slot(self, device: DeviceConfig, address: str, data_type: DataType | None) -> Slot:
        try:
            parsed = parse_node_id(address)
        except TagError as exc:
            raise UnservableError(str(exc)) from exc
        node = parsed.node_id
        if parsed.namespace_uri is None and node.NamespaceIndex < FIRST_NAMESPACE:
            which = "the standard" if node.NamespaceIndex == 0 else "the server's own"
            raise UnservableError(f"ns={node.NamespaceIndex} is {which} namespace: the simulator serves "
                                  f"variables in ns={FIRST_NAMESPACE} and above")
        namespace: Any = parsed.namespace_uri or node.NamespaceIndex
        return Slot(key=(namespace, node.NodeIdType, node.Identifier))

    def infer_type(self, value: bool | int | float | str) -> DataType:
        return _INFERRED[type(value)]

    def check_type(self, data_type: DataType) -> None:
        return None  # every data type has a variant type

    def server(self, device: DeviceConfig, points: Sequence[SimPoint], host: str, port: int,
               methods: Sequence[ServedMethod] = ()) -> SimServer:
        from simulators.servers.opcua import OpcUaSimServer
        from simulators.servers.opcua_methods import SimArgument, SimMethod

        path = self.endpoint(device).path
        uris = namespaces(device.name, [p.address for p in points] + [m.object_address for m in methods])
        served = [SimMethod(m.object_address, m.name, tuple(SimArgument(*a) for a in m.inputs),
                            tuple(SimArgument(*a) for a in m.outputs), _handler(m)) for m in methods]
        try:
            return OpcUaSimServer(points, host=host, port=port, endpoint_path=path, namespace_uris=uris,
                                  methods=served)
        except ValueError as exc:
            raise UnservableError(str(exc)) from exc

    def device_out(self, table: Mapping[str, Any], configured: Endpoint, host: str, port: int,
                   server: SimServer) -> dict[str, Any]:
        out = {key: value for key, value in table.items() if key not in SECURITY_KEYS}
        out["url"] = f"opc.tcp://{host}:{port}{configured.path}"
        return out

    def tag_out(self, table: Mapping[str, Any], data_type: DataType) -> dict[str, Any]:
        return dict(table)


KIND = OpcUaKind()
