"""One OPC UA connection attempt: build the asyncua client from the settings, connect, tear down.

A :class:`Connection` is one client plus what is learned while it is up (namespace array, variant
types of nodes, the subscription), with the two lookups that fill those caches. A new connection
starts with empty caches, so a server restarted with a different address space is never written
with stale types.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asyncua import ua
from asyncua.client.client import Client
from asyncua.client.ua_client import UaClientState
from asyncua.common.node import Node
from asyncua.common.ua_utils import data_type_to_variant_type
from asyncua.crypto import security_policies
from asyncua.crypto.uacrypto import CertProperties
from asyncua.ua.attribute_ids import AttributeIds
from asyncua.ua.object_ids import ObjectIds
from asyncua.ua.status_codes import StatusCodes
from asyncua.ua.uaerrors import UaError, UaStatusCodeError

from exchange._drivers.opcua.settings import OpcUaSettings
from exchange._drivers.opcua.values import NodeAddress, quality_of, status_name
from exchange._values import Quality
from exchange.errors import CommunicationError, DeviceError, ExchangeError

if TYPE_CHECKING:
    from asyncua.common.subscription import Subscription

log = logging.getLogger(__name__)


class _PublishLoopNoise(logging.Filter):
    """Drop asyncua's ERROR traceback when its publish loop finds the connection closed.

    That happens on every server restart, before the driver notices the loss and reports it once (a
    WARNING naming the device); the traceback adds nothing but alarm.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, ConnectionError) and str(record.msg).startswith("Publish iteration"))


logging.getLogger("asyncua.client.ua_session.UaSession").addFilter(_PublishLoopNoise())

_LOGIN_CODES = frozenset({
    StatusCodes.BadUserAccessDenied,
    StatusCodes.BadIdentityTokenInvalid,
    StatusCodes.BadIdentityTokenRejected,
    StatusCodes.BadUserSignatureInvalid,
})
_SECURITY_CODES = frozenset({
    StatusCodes.BadSecurityPolicyRejected,
    StatusCodes.BadSecurityModeRejected,
    StatusCodes.BadSecurityChecksFailed,
    StatusCodes.BadCertificateInvalid,
    StatusCodes.BadCertificateUntrusted,
    StatusCodes.BadCertificateTimeInvalid,
    StatusCodes.BadCertificateUriInvalid,
    StatusCodes.BadCertificateUseNotAllowed,
    StatusCodes.BadCertificateRevoked,
    StatusCodes.BadApplicationSignatureInvalid,
    StatusCodes.BadNonceInvalid,
})


@dataclass(eq=False)
class Connection:
    """A connected client and the per-connection caches (asyncua's errors propagate from its methods)."""

    client: Client
    namespaces: list[str] | None = None
    variant_types: dict[ua.NodeId, ua.VariantType] = field(default_factory=dict)
    value_ranks: dict[ua.NodeId, int] = field(default_factory=dict)  # -1 scalar, 1 array, -2 either, ...
    # a one-dimensional node's length, where its ArrayDimensions declares one (a PLC's fixed array)
    array_lengths: dict[ua.NodeId, int] = field(default_factory=dict)
    methods: dict[tuple[ua.NodeId, str], Any] = field(default_factory=dict)  # methods.Signature, by object
    subscription: Subscription | None = None
    subscribing: asyncio.Task[Subscription] | None = None  # the one CreateSubscription in flight
    monitored: dict[int, int] = field(default_factory=dict)  # subscription record id -> monitored item id

    async def resolve(self, addresses: Sequence[NodeAddress]) -> list[ua.NodeId | None]:
        """The NodeId of each address on this server (None: its ``nsu=`` namespace is unknown here);
        the namespace array is read once per connection, and only when an address needs it."""
        if any(a.namespace_uri is not None for a in addresses) and self.namespaces is None:
            node = ua.NodeId(ua.Int32(ObjectIds.Server_NamespaceArray))
            [value] = await self.client.uaclient.read_attributes([node], AttributeIds.Value)
            self.namespaces = list(value.Value.Value or []) if value.Value is not None else []
        return [a.resolve(self.namespaces or []) for a in addresses]

    async def learn_variant_types(self, node_ids: list[ua.NodeId]) -> dict[ua.NodeId, int]:
        """Learn (once per connection) each node's variant type, value rank and, for a one-dimensional
        array, the length its ArrayDimensions declares (0 or absent: the length varies), in one Read
        request; return bad status codes by node."""
        missing = list(dict.fromkeys(n for n in node_ids if n not in self.variant_types))
        if not missing:
            return {}
        uaclient = self.client.uaclient
        params = ua.ReadParameters(NodesToRead=[
            ua.ReadValueId(NodeId=node_id, AttributeId=attribute)
            for node_id in missing for attribute in _SHAPE
        ])
        results = await uaclient.read(params)
        bad: dict[ua.NodeId, int] = {}
        for index, node_id in enumerate(missing):
            result, rank, dimensions = results[len(_SHAPE) * index : len(_SHAPE) * (index + 1)]
            code = result.StatusCode.value if result.StatusCode is not None else 0
            if quality_of(code) is not Quality.GOOD or result.Value is None:
                bad[node_id] = code or StatusCodes.BadNodeIdUnknown
                continue
            variant_type = await self.variant_type_of(result.Value.Value, node_id)
            self.variant_types[node_id] = variant_type
            rank_value = rank.Value.Value if rank.Value is not None else None
            # unknown (-2, "any"): the server judges the shape
            self.value_ranks[node_id] = rank_value if isinstance(rank_value, int) else -2
            length = _declared_length(rank_value, dimensions)
            if length is not None:
                self.array_lengths[node_id] = length
        return bad

    def forget_shape(self, node_id: ua.NodeId) -> None:
        """Learn the node's type and shape again at its next write (the server refused them)."""
        self.variant_types.pop(node_id, None)
        self.value_ranks.pop(node_id, None)
        self.array_lengths.pop(node_id, None)

    async def variant_type_of(self, data_type: ua.NodeId, node_id: ua.NodeId | None = None) -> ua.VariantType:
        """The variant type that carries values of ``data_type`` (for an abstract type, the current
        value's type of ``node_id`` when given, else Variant: the value as given)."""
        if data_type.NamespaceIndex == 0 and isinstance(data_type.Identifier, int) and (
            1 <= data_type.Identifier <= 25 and data_type.Identifier != 24
        ):
            return ua.VariantType(data_type.Identifier)
        uaclient = self.client.uaclient
        variant_type = await data_type_to_variant_type(Node(uaclient.session, data_type))
        if variant_type == ua.VariantType.Variant and node_id is not None:  # abstract (Number, BaseDataType)
            [current] = await uaclient.read_attributes([node_id], AttributeIds.Value)
            if current.Value is not None and current.Value.VariantType != ua.VariantType.Null:
                variant_type = current.Value.VariantType
        return variant_type


_SHAPE = (AttributeIds.DataType, AttributeIds.ValueRank, AttributeIds.ArrayDimensions)


def _declared_length(rank: Any, dimensions: ua.DataValue) -> int | None:
    """The length a one-dimensional node's ArrayDimensions declares; None when it declares none (0,
    absent, unreadable: many servers answer BadAttributeIdInvalid)."""
    if rank != 1 or (dimensions.StatusCode is not None and not dimensions.StatusCode.is_good()):
        return None
    value = dimensions.Value.Value if dimensions.Value is not None else None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], int) and value[0] > 0:
        return int(value[0])
    return None


def new_client(settings: OpcUaSettings) -> Client:
    client = Client(settings.url, timeout=settings.timeout_s, watchdog_intervall=1.0)
    client.session_timeout = settings.session_timeout_ms
    client.application_uri = settings.application_uri
    client.name = client.description = f"Exchange {settings.device}"
    if settings.username is not None and settings.password is not None:
        client.set_user(settings.username)
        client.set_password(settings.password)
    return client


async def open_client(client: Client, settings: OpcUaSettings) -> None:
    """Configure security and connect (socket, secure channel, session); raises asyncua's errors."""
    if settings.secured:
        assert settings.certificate is not None and settings.private_key is not None
        policy = getattr(security_policies, f"SecurityPolicy{settings.security_policy}")
        server_cert = None
        if settings.server_certificate is not None:
            server_cert = CertProperties(settings.server_certificate.content, settings.server_certificate.extension)
        await client.set_security(
            policy,
            CertProperties(settings.certificate.content, settings.certificate.extension),
            CertProperties(
                settings.private_key.content, settings.private_key.extension, settings.private_key_password
            ),
            server_certificate=server_cert,
            mode=getattr(ua.MessageSecurityMode, settings.security_mode),
        )
    await client.connect()


async def dispose(client: Client, graceful: bool, timeout_s: float) -> None:
    """Close a client without raising: a clean CloseSession when ``graceful``, else just let go."""
    try:
        if graceful and client.uaclient.state is UaClientState.CONNECTED:
            await asyncio.wait_for(client.disconnect(), timeout_s)
            return
        # close_session() also stops the client's supervisor, watchdog and publish tasks
        await asyncio.wait_for(client.close_session(), min(timeout_s, 1.0))
    except asyncio.CancelledError:
        raise
    except Exception:  # the connection is already gone; only the tasks had to stop
        log.debug("closing OPC UA client %s failed", client, exc_info=True)
    finally:
        client.disconnect_socket()


def connect_error(settings: OpcUaSettings, exc: BaseException) -> ExchangeError:
    """Translate a failed connect into CommunicationError (retry may help) or DeviceError (it won't)."""
    target = f"OPC UA device {settings.device!r} at {settings.url}"
    if isinstance(exc, UaStatusCodeError):
        code = exc.code & 0xFFFF0000
        name = status_name(exc.code)
        if code in _LOGIN_CODES:
            who = f"user {settings.username!r}" if settings.username else "an anonymous login"
            hint = "check username and password" if settings.username else "the server needs a username"
            return DeviceError(f"{target} refused {who} ({name}): {hint}")
        if code in _SECURITY_CODES:
            return DeviceError(
                f"{target} refused the secure channel ({name}): check security_policy "
                f"{settings.security_policy!r}, security_mode and the certificates"
            )
        return CommunicationError(f"{target}: connect failed ({name})")
    if isinstance(exc, UaError) and "No matching endpoints" in str(exc):
        if not settings.secured:
            return DeviceError(
                f"{target} offers no endpoint without security (security_policy 'None'): "
                "set security_policy, certificate and private_key"
            )
        return DeviceError(
            f"{target} offers no endpoint with security_policy {settings.security_policy!r} and "
            f"security_mode {settings.security_mode!r}"
        )
    if isinstance(exc, TimeoutError):
        return CommunicationError(f"{target} did not answer within {settings.timeout_ms} ms")
    if isinstance(exc, OSError):
        return CommunicationError(f"{target} cannot be reached: {exc.strerror or exc}")
    return CommunicationError(f"{target}: connect failed: {exc!r}")
