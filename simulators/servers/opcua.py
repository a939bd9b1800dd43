"""A simulated OPC UA server: the real asyncua server, in its own event-loop thread.

Every :class:`SimPoint` becomes a variable with the point's string or numeric NodeId
(``ns=2;s=Line1.Tank.Level``; ``ns=2`` is the first namespace the server registers, ``namespace_uri``;
``namespace_uris`` registers several, as ns=2, ns=3, ...; ``nsu=URI;...`` addresses name one of them)
and the exact variant type of its data type, writable by clients when ``writable``; an ``array`` point
is a one-dimensional array (ValueRank 1) of it, whose ArrayDimensions declares its ``length`` (0: it
varies). :meth:`set_bad` makes a point answer a Bad status (a
failed sensor) until :meth:`set_good`. :class:`~simulators.servers.opcua_methods.SimMethod` s become
objects with methods (arguments typed, refusals answered with their status code); the calls that
reached a handler are counted (:meth:`OpcUaSimServer.call_count`).

Faults and instrumentation for tests: :meth:`stop`/:meth:`start` (a full power cycle; values are
kept), :meth:`restart` (the listener and every session go away and come back on the same port, in
milliseconds), :meth:`drop_connections`, and counters of the client Read and Write requests that
reached the server (hooked on the server's pre-read/pre-write callbacks, so server-side :meth:`set`
calls are not counted).

Security: pass :class:`OpcUaSimSecurity` to offer only signed/encrypted endpoints, require user
names and passwords, or trust only given client certificates. :func:`write_self_signed_certificate`
makes certificates for it (and for clients) at run time.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from asyncua import ua
from asyncua.common.callback import CallbackType, ServerItemCallback
from asyncua.common.utils import ServiceError
from asyncua.crypto import cert_gen
from asyncua.crypto.permission_rules import User, UserRole
from asyncua.server.server import Server
from asyncua.server.user_managers import UserManager
from asyncua.ua.attribute_ids import AttributeIds
from asyncua.ua.status_codes import StatusCodes
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from exchange._drivers.opcua.encode import ONE_DIMENSION, SCALAR, to_variant
from exchange._drivers.opcua.loop import LoopThread
from exchange._drivers.opcua.values import parse_node_id, plain
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.opcua_methods import MethodRefused, SimMethod

log = logging.getLogger(__name__)

VARIANT_TYPES: dict[DataType, ua.VariantType] = {
    DataType.BOOLEAN: ua.VariantType.Boolean,
    DataType.INT8: ua.VariantType.SByte,
    DataType.UINT8: ua.VariantType.Byte,
    DataType.INT16: ua.VariantType.Int16,
    DataType.UINT16: ua.VariantType.UInt16,
    DataType.INT32: ua.VariantType.Int32,
    DataType.UINT32: ua.VariantType.UInt32,
    DataType.INT64: ua.VariantType.Int64,
    DataType.UINT64: ua.VariantType.UInt64,
    DataType.FLOAT32: ua.VariantType.Float,
    DataType.FLOAT64: ua.VariantType.Double,
    DataType.STRING: ua.VariantType.String,
}
_APP_NAMESPACE_INDEX = 2  # the first namespace a fresh asyncua server registers


def write_self_signed_certificate(
    cert_path: Path, key_path: Path, application_uri: str, *, server: bool, host_name: str | None = None
) -> tuple[Path, Path]:
    """Write a new self-signed OPC UA application certificate (DER) and its private key (PEM).

    ``server`` selects the extended key usage (server or client authentication). Returns the paths.
    """
    key = cert_gen.generate_private_key()
    host = host_name or socket.gethostname()
    cert = cert_gen.generate_self_signed_app_certificate(
        key,
        application_uri,
        {},
        [x509.UniformResourceIdentifier(application_uri), x509.DNSName(host), x509.DNSName("localhost")],
        extended=[ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH],
        days=30,
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.DER))
    key_path.write_bytes(cert_gen.dump_private_key_as_pem(key))
    return cert_path, key_path


@dataclass(frozen=True)
class OpcUaSimSecurity:
    """What the simulated server demands from clients.

    ``policies``: ua.SecurityPolicyType names, e.g. ``("Basic256Sha256_SignAndEncrypt",)``;
    ``"NoSecurity"`` offers an unsecured endpoint. ``certificate``/``private_key`` (file paths, PEM or
    DER) are required by any other policy. ``users`` maps user names to passwords; anonymous logins
    are allowed only when ``users`` is None unless ``allow_anonymous`` says otherwise.
    ``trusted_client_certificates`` (paths): when given, any other client certificate is refused with
    BadCertificateUntrusted.
    """

    certificate: Path | None = None
    private_key: Path | None = None
    policies: tuple[str, ...] = ("Basic256Sha256_SignAndEncrypt",)
    users: Mapping[str, str] | None = None
    allow_anonymous: bool | None = None
    trusted_client_certificates: tuple[Path, ...] | None = None


class _Users(UserManager):
    """User manager: name/password pairs, plus anonymous when allowed. Everyone gets the User role."""

    def __init__(self, users: Mapping[str, str] | None, allow_anonymous: bool) -> None:
        self._users = dict(users or {})
        self._anonymous = allow_anonymous

    def get_user(self, iserver: Any, username: str | None = None, password: str | None = None,
                 certificate: Any = None) -> User | None:
        if username is None:
            return User(role=UserRole.User) if self._anonymous or certificate is not None else None
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), (password or "").encode()):
            return None
        return User(role=UserRole.User, name=username)


class OpcUaSimServer:
    """A :class:`simulators.servers.base.SimServer` speaking OPC UA (see the module docstring)."""

    def __init__(
        self,
        points: Sequence[SimPoint],
        host: str = "127.0.0.1",
        port: int = 0,
        namespace_uri: str = "urn:exchange:plant",
        endpoint_path: str = "/plant/",
        security: OpcUaSimSecurity | None = None,
        namespace_uris: Sequence[str] | None = None,
        methods: Sequence[SimMethod] = (),
    ) -> None:
        self.host = host
        self.port = port
        self.namespace_uris: tuple[str, ...] = tuple(namespace_uris) if namespace_uris else (namespace_uri,)
        self.namespace_uri = self.namespace_uris[0]
        self.endpoint_path = endpoint_path if endpoint_path.startswith("/") else "/" + endpoint_path
        self.security = security
        self.points: dict[str, SimPoint] = {}
        self._node_ids: dict[str, ua.NodeId] = {}
        self._addresses: dict[ua.NodeId, str] = {}
        for point in points:
            self._add_point(point)
        self.methods = tuple(methods)
        for method in self.methods:
            self._check_method(method)
        self._calls: Counter[str] = Counter()
        self._values: dict[str, Any] = {p.address: p.initial for p in self.points.values()}
        self._thread: LoopThread | None = None
        self._server: Server | None = None
        self._lock = threading.Lock()
        self._write_requests = 0
        self._writes: Counter[str] = Counter()
        self._read_requests = 0
        self._reads: Counter[str] = Counter()
        self._listeners: list[Callable[[str, Any], None]] = []
        self._bad: dict[str, int] = {}  # address -> the Bad status code it answers
        self._held: dict[str, Any] = {}  # address -> its value while it answers a Bad status

    def _add_point(self, point: SimPoint) -> None:
        parsed = parse_node_id(point.address)
        if parsed.namespace_uri is not None and parsed.namespace_uri not in self.namespace_uris:
            raise ValueError(f"sim point {point.address!r}: namespace URI is not one of "
                             f"{', '.join(repr(u) for u in self.namespace_uris)}")
        node_id = parsed.resolve(["", "", *self.namespace_uris])
        last = _APP_NAMESPACE_INDEX + len(self.namespace_uris) - 1
        if node_id is None or not _APP_NAMESPACE_INDEX <= node_id.NamespaceIndex <= last:
            served = f"ns={_APP_NAMESPACE_INDEX}" + (f" to ns={last}" if last > _APP_NAMESPACE_INDEX else "")
            raise ValueError(f"sim point {point.address!r}: use {served} (the simulator's namespaces)")
        if point.address in self.points or node_id in self._addresses:
            raise ValueError(f"sim point {point.address!r} is defined twice")
        if point.data_type not in VARIANT_TYPES:
            raise ValueError(f"sim point {point.address!r}: data type {point.data_type} is not supported")
        self.points[point.address] = point
        self._node_ids[point.address] = node_id
        self._addresses[node_id] = point.address

    def _object_id(self, method: SimMethod) -> ua.NodeId | None:
        """The NodeId of the method's object, when it is a string id in one of the server's namespaces."""
        try:
            node_id = parse_node_id(method.object_address).resolve(["", "", *self.namespace_uris])
        except Exception:  # noqa: BLE001 - any unparsable address is refused by the caller, named
            return None
        last = _APP_NAMESPACE_INDEX + len(self.namespace_uris) - 1
        if node_id is None or not _APP_NAMESPACE_INDEX <= node_id.NamespaceIndex <= last:
            return None
        return node_id if isinstance(node_id.Identifier, str) else None

    def _check_method(self, method: SimMethod) -> None:
        node_id = self._object_id(method)
        if node_id is None:
            raise ValueError(f"sim method {method.name!r}: the object {method.object_address!r} must be a string "
                             f"node id in the simulator's namespaces (ns={_APP_NAMESPACE_INDEX};s=...)")
        if node_id in self._addresses:
            raise ValueError(f"sim method {method.name!r}: {method.object_address!r} is a variable, not an object")
        for arg in (*method.inputs, *method.outputs):
            if arg.data_type not in VARIANT_TYPES:
                raise ValueError(f"sim method {method.name!r}: argument {arg.name!r} has an unsupported data type")
            arg.argument()

    def _variant(self, point: SimPoint, value: Any, where: str) -> ua.Variant:
        """``value`` as the point's node holds it (a list for an array point)."""
        return to_variant(value, VARIANT_TYPES[point.data_type], None, where,
                          value_rank=ONE_DIMENSION if point.array else SCALAR)

    @property
    def url(self) -> str:
        return f"opc.tcp://{self.host}:{self.port}{self.endpoint_path}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Build the server (about 1.5 s: asyncua loads the standard address space) and listen."""
        if self._server is not None:
            return
        thread = LoopThread(f"opcua-sim-{self.port or 'new'}")
        try:
            self._server = thread.run(self._build(), 30.0)
        except BaseException:
            thread.stop()
            raise
        self._thread = thread
        log.info("OPC UA simulator listening on %s", self.url)

    def stop(self) -> None:
        """Stop listening, end every session and the thread; values are kept for the next start()."""
        if self._server is None or self._thread is None:
            return
        server, thread = self._server, self._thread
        try:
            self._values = thread.run(self._snapshot(server), 10.0)
            thread.run(self._shutdown(server), 10.0)
        finally:
            self._server = self._thread = None
            thread.stop()

    def restart(self) -> None:
        """Drop the listener, every connection and every session; listen again on the same port."""
        if self._server is None or self._thread is None:
            self.start()
            return
        self._thread.run(self._bounce(self._server), 10.0)

    def drop_connections(self) -> None:
        """Close every client connection (sessions with subscriptions stay, as OPC UA allows)."""
        if self._server is not None and self._thread is not None:
            self._thread.run(self._drop(self._server), 10.0)

    async def _build(self) -> Server:
        security = self.security
        users = security.users if security else None
        anonymous = security.allow_anonymous if security and security.allow_anonymous is not None else users is None
        server = Server(user_manager=_Users(users, anonymous))
        server.disable_clock()  # its 1 s tick would make stop() take a second
        await server.init()
        server.set_endpoint(f"opc.tcp://{self.host}:{self.port}{self.endpoint_path}")
        server.set_server_name("Exchange OPC UA simulator")
        await server.set_application_uri("urn:exchange:simulator:opcua")
        if security is not None:
            await self._secure(server, security)
        for expected, uri in enumerate(self.namespace_uris, start=_APP_NAMESPACE_INDEX):
            index = await server.register_namespace(uri)
            assert index == expected, (index, uri)
        index = _APP_NAMESPACE_INDEX
        folder_id = ua.NodeId(ua.String("Simulator"), ua.Int16(index))
        folder = await server.nodes.objects.add_folder(folder_id, ua.QualifiedName("Simulator", index))
        for address, point in self.points.items():
            node_id = self._node_ids[address]
            variant = self._variant(point, self._values[address], f"sim point {address}")
            name = ua.QualifiedName(str(node_id.Identifier), node_id.NamespaceIndex)
            variable = await folder.add_variable(node_id, name, variant)
            if point.array:  # asyncua declares every variable scalar; clients learn the shape from these
                await variable.write_attribute(AttributeIds.ValueRank,
                                               ua.DataValue(ua.Variant(ONE_DIMENSION, ua.VariantType.Int32)))
                await variable.write_attribute(AttributeIds.ArrayDimensions,
                                               ua.DataValue(ua.Variant([point.length or 0], ua.VariantType.UInt32,
                                                                       is_array=True)))
            if point.writable:
                await variable.set_writable()
        for address, code in self._bad.items():
            await self._write_status(server, address, code)
        await self._add_methods(server)
        server.subscribe_server_callback(CallbackType.PreRead, self._on_read)
        server.subscribe_server_callback(CallbackType.PreWrite, self._on_write)
        server.subscribe_server_callback(CallbackType.PostWrite, self._after_write)
        await server.start()
        assert server.bserver is not None
        self.port = server.bserver.port
        return server

    async def _add_methods(self, server: Server) -> None:
        objects: dict[ua.NodeId, Any] = {}
        for method in self.methods:
            object_id = self._object_id(method)
            assert object_id is not None  # checked in __init__
            name, index = str(object_id.Identifier), object_id.NamespaceIndex
            if object_id not in objects:
                objects[object_id] = await server.nodes.objects.add_object(
                    object_id, ua.QualifiedName(name.rsplit(".", 1)[-1], index))
            await objects[object_id].add_method(
                ua.NodeId(ua.String(f"{name}.{method.name}"), ua.Int16(index)), ua.QualifiedName(method.name, index),
                self._method_callback(server, method),
                [a.argument() for a in method.inputs], [a.argument() for a in method.outputs])

    def _method_callback(self, server: Server, method: SimMethod) -> Callable[..., Any]:
        async def called(_parent: ua.NodeId, *arguments: ua.Variant) -> Any:
            values = [plain(v.Value, v.VariantType) for v in arguments]
            scope = _Scope(self, server)
            try:
                # on a worker thread: a handler may wait for its plant's lock while the plant's
                # ticker waits for this loop (to read or set points)
                outputs = list(await asyncio.to_thread(method.handler, scope, values))
            except MethodRefused as exc:
                log.info("OPC UA simulator: %s refused with %s: %s", method.name, exc.status, exc)
                return ua.StatusCode(getattr(StatusCodes, exc.status))
            with self._lock:
                self._calls[method.name] += 1
            for address, variant in scope.writes:
                data_value = ua.DataValue(variant, SourceTimestamp=_now(), ServerTimestamp=_now())
                await server.write_attribute_value(self._node_ids[address], data_value)
            return [to_variant(value, VARIANT_TYPES[arg.data_type], None, f"{method.name} output {arg.name}",
                               value_rank=ONE_DIMENSION if arg.array else SCALAR)
                    for arg, value in zip(method.outputs, outputs, strict=True)]

        return called

    async def _secure(self, server: Server, security: OpcUaSimSecurity) -> None:
        server.set_security_policy([getattr(ua.SecurityPolicyType, name) for name in security.policies])
        tokens: list[type] = [ua.UserNameIdentityToken, ua.X509IdentityToken]
        if security.allow_anonymous or (security.allow_anonymous is None and security.users is None):
            tokens.append(ua.AnonymousIdentityToken)
        server.set_identity_tokens(tokens)
        if security.certificate is not None and security.private_key is not None:
            cert, key = security.certificate.read_bytes(), security.private_key.read_bytes()
            await server.load_certificate(cert, format="pem" if cert.startswith(b"-----") else "der")
            await server.load_private_key(key, format="pem" if key.startswith(b"-----") else "der")
        if security.trusted_client_certificates is not None:
            trusted = {_der(Path(p).read_bytes()) for p in security.trusted_client_certificates}

            async def validate(certificate: x509.Certificate, app: ua.ApplicationDescription) -> None:
                if certificate.public_bytes(serialization.Encoding.DER) not in trusted:
                    raise ServiceError(StatusCodes.BadCertificateUntrusted)

            server.set_certificate_validator(validate)

    async def _close_listener(self, server: Server) -> None:
        """Stop accepting, then close connections until none is left.

        asyncua's own stop closes the connections first and the listener later, so a client that
        reconnects in between keeps a connection nobody closes and the stop waits for it forever.
        """
        listener = getattr(server.bserver, "_server", None)
        if listener is not None:
            listener.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2.0
        while loop.time() < deadline:
            transports = list(server.iserver.asyncio_transports)
            for transport in transports:
                transport.close()
            await asyncio.sleep(0.005)  # let accepted sockets reach connection_made and closes finish
            if not transports and not server.iserver.asyncio_transports:
                return

    async def _shutdown(self, server: Server) -> None:
        await self._close_listener(server)
        await server.stop()

    async def _bounce(self, server: Server) -> None:
        bserver = server.bserver
        assert bserver is not None
        policies = getattr(bserver, "_policies", [])
        await self._close_listener(server)
        await bserver.stop()
        # a restarted PLC has no sessions: end them, so clients cannot resume them
        for session in list(getattr(server.iserver, "_external_sessions", {}).values()):
            await session.close_session(True)
        from asyncua.server.binary_server_asyncio import BinaryServer

        server.bserver = BinaryServer(server.iserver, self.host, self.port, server.limits)
        server.bserver.set_policies(policies)
        await server.bserver.start()

    async def _drop(self, server: Server) -> None:
        for transport in list(server.iserver.asyncio_transports):
            transport.close()

    async def _snapshot(self, server: Server) -> dict[str, Any]:
        return {address: self._read_now(server, address) for address in self.points}

    def _read_now(self, server: Server, address: str) -> Any:
        if address in self._held:
            return self._held[address]
        variant = server.read_attribute_value(self._node_ids[address]).Value
        return plain(variant.Value, variant.VariantType) if variant is not None else None

    # -- values -------------------------------------------------------------------------------------

    def _check(self, address: str) -> SimPoint:
        point = self.points.get(address)
        if point is None:
            raise KeyError(f"the OPC UA simulator has no point {address!r}")
        return point

    def get(self, address: str) -> Any:
        """The server-side value (Float32 values rounded to the shortest equal decimal)."""
        return self.get_many([address])[address]

    def set(self, address: str, value: Any) -> None:
        """Change the value as the PLC program would; subscribed clients are notified."""
        self.set_many({address: value})

    def get_many(self, addresses: Sequence[str]) -> dict[str, Any]:
        """Several server-side values in one call into the server's loop."""
        for address in addresses:
            self._check(address)
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return {address: self._held.get(address, self._values[address]) for address in addresses}

        async def read() -> dict[str, Any]:
            return {address: self._read_now(server, address) for address in addresses}

        return thread.run(read(), 10.0)

    def set_many(self, values: Mapping[str, Any]) -> None:
        """Change several values server-side in one call into the server's loop."""
        variants = {address: self._variant(self._check(address), value, f"sim point {address}")
                    for address, value in values.items()}
        for address in [a for a in variants if a in self._bad]:  # a failed sensor keeps its Bad status
            self._held[address] = plain(variants.pop(address).Value, VARIANT_TYPES[self.points[address].data_type])
        server, thread = self._server, self._thread
        if server is None or thread is None:
            self._values.update({address: variant.Value for address, variant in variants.items()})
            return

        async def write() -> None:
            for address, variant in variants.items():
                data_value = ua.DataValue(variant, SourceTimestamp=_now(), ServerTimestamp=_now())
                await server.write_attribute_value(self._node_ids[address], data_value)

        thread.run(write(), 10.0)

    def set_bad(self, address: str, status: int = StatusCodes.BadSensorFailure) -> None:
        """Answer reads of ``address`` with the Bad ``status`` (clients get no value) until
        :meth:`set_good`. Server-side :meth:`get`/:meth:`set` keep working on the value it holds."""
        self._check(address)
        if address not in self._bad:
            self._held[address] = self.get(address)
        self._bad[address] = status
        server, thread = self._server, self._thread
        if server is not None and thread is not None:
            thread.run(self._write_status(server, address, status), 10.0)

    def set_good(self, address: str) -> None:
        """Undo :meth:`set_bad`: the point answers its (last set) value again."""
        self._check(address)
        if self._bad.pop(address, None) is None:
            return
        self.set(address, self._held.pop(address))

    async def _write_status(self, server: Server, address: str, status: int) -> None:
        data_value = ua.DataValue(StatusCode=ua.StatusCode(ua.UInt32(status)), SourceTimestamp=_now(),
                                  ServerTimestamp=_now())
        await server.write_attribute_value(self._node_ids[address], data_value)

    def add_write_listener(self, listener: Callable[[str, Any], None]) -> None:
        """Call ``listener(address, value)`` (on the server's thread) after each accepted client write."""
        self._listeners.append(listener)

    # -- counters -----------------------------------------------------------------------------------

    def write_count(self, address: str | None = None) -> int:
        """Client Write requests that reached the server (None), or writes of one address."""
        with self._lock:
            return self._write_requests if address is None else self._writes[self._check(address).address]

    def call_count(self, method: str | None = None) -> int:
        """Method calls a handler accepted (refused ones are not counted), of one method or all."""
        with self._lock:
            return sum(self._calls.values()) if method is None else self._calls[method]

    def read_count(self, address: str | None = None) -> int:
        """Client Read requests that included at least one point (None), or reads of one address."""
        with self._lock:
            return self._read_requests if address is None else self._reads[self._check(address).address]

    def connection_count(self) -> int:
        """Open client connections."""
        server = self._server
        return len(server.bserver.clients) if server is not None and server.bserver is not None else 0

    def _on_read(self, event: ServerItemCallback, _dispatcher: Any) -> None:
        if not event.is_external:
            return
        hits = [self._addresses.get(item.NodeId) for item in event.request_params.NodesToRead
                if item.AttributeId == AttributeIds.Value]
        found = [a for a in hits if a is not None]
        if found:
            with self._lock:
                self._read_requests += 1
                self._reads.update(found)

    def _on_write(self, event: ServerItemCallback, _dispatcher: Any) -> None:
        if not event.is_external:
            return
        found = [self._addresses.get(item.NodeId) for item in event.request_params.NodesToWrite]
        with self._lock:
            self._write_requests += 1
            self._writes.update(a for a in found if a is not None)

    def _after_write(self, event: ServerItemCallback, _dispatcher: Any) -> None:
        if not event.is_external or not self._listeners:
            return
        for item, status in zip(event.request_params.NodesToWrite, event.response_params or []):
            address = self._addresses.get(item.NodeId)
            if address is None or not status.is_good() or item.AttributeId != AttributeIds.Value:
                continue
            variant = item.Value.Value
            value = plain(variant.Value, variant.VariantType) if variant is not None else None
            for listener in list(self._listeners):
                try:
                    listener(address, value)
                except Exception:
                    log.exception("OPC UA simulator write listener failed for %s", address)


class _Scope:
    """A handler's view of the points: reads are live; changes are applied after it returns, so a
    refused call changes nothing."""

    def __init__(self, sim: OpcUaSimServer, server: Server) -> None:
        self._sim, self._server = sim, server
        self.writes: list[tuple[str, ua.Variant]] = []

    def get(self, address: str) -> Any:
        self._sim._check(address)
        return self._sim._read_now(self._server, address)

    def set(self, address: str, value: Any) -> None:
        point = self._sim._check(address)
        self.writes.append((address, self._sim._variant(point, value, f"sim point {address}")))


def _der(content: bytes) -> bytes:
    if content.lstrip().startswith(b"-----"):
        return x509.load_pem_x509_certificate(content).public_bytes(serialization.Encoding.DER)
    return content


def _now() -> Any:  # asyncua types timestamps as its own DateTime alias
    return datetime.now(UTC)
