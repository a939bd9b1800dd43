"""OPC UA addresses, status codes and values, translated to and from Exchange's terms.

- :func:`parse_node_id` turns an address (``ns=2;s=Line1.Tank.Level``, ``ns=2;i=1001``,
  ``nsu=urn:x;s=A.B``, ``ns=1;g=<guid>``, ``ns=1;b=<base64>``) into a :class:`NodeAddress`.
- :func:`quality_of` maps an OPC UA status code to Ignition's quality names.
- :func:`to_qualified` turns a DataValue into a :class:`QualifiedValue`.

Values going the other way (a write) are :mod:`exchange._drivers.opcua.encode`'s.
"""

from __future__ import annotations

import base64
import math
import struct
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asyncua import ua
from asyncua.ua.status_codes import StatusCodes

from exchange._drivers.opcua.addresses import parse_node_id_text
from exchange._values import QualifiedValue, Quality


@dataclass(frozen=True)
class NodeAddress:
    """A parsed NodeId; ``namespace_uri`` is set (and ``node_id`` has index 0) for ``nsu=`` addresses."""

    text: str
    node_id: ua.NodeId
    namespace_uri: str | None = None

    def resolve(self, namespaces: list[str]) -> ua.NodeId | None:
        """The NodeId with the namespace index the server uses for ``namespace_uri`` (None: unknown)."""
        if self.namespace_uri is None:
            return self.node_id
        if self.namespace_uri not in namespaces:
            return None
        index = namespaces.index(self.namespace_uri)
        return ua.NodeId(self.node_id.Identifier, ua.Int16(index), self.node_id.NodeIdType)


def parse_node_id(address: str) -> NodeAddress:
    """Parse an OPC UA NodeId address; raise :class:`TagPathError` naming the address and the fault
    (the checks are :func:`~exchange._drivers.opcua.addresses.parse_node_id_text`'s)."""
    parsed = parse_node_id_text(address)
    identifier: Any = parsed.identifier  # asyncua's aliases of int, str, UUID and bytes
    node_id = ua.NodeId(identifier, ua.Int16(parsed.namespace_index), _NODE_TYPES[parsed.kind])
    return NodeAddress(parsed.text, node_id, parsed.namespace_uri)


_NODE_TYPES = {"i": ua.NodeIdType.Numeric, "s": ua.NodeIdType.String, "g": ua.NodeIdType.Guid,
               "b": ua.NodeIdType.ByteString}


# Status code (upper 16 bits) -> Ignition quality; anything else Bad is plain "Bad".
_QUALITIES: dict[int, Quality] = {
    StatusCodes.BadNodeIdUnknown: Quality.BAD_NOT_FOUND,
    StatusCodes.BadNodeIdInvalid: Quality.BAD_NOT_FOUND,
    StatusCodes.BadAttributeIdInvalid: Quality.BAD_NOT_FOUND,
    StatusCodes.BadNoData: Quality.BAD_NOT_FOUND,
    StatusCodes.BadUserAccessDenied: Quality.BAD_ACCESS_DENIED,
    StatusCodes.BadNotReadable: Quality.BAD_ACCESS_DENIED,
    StatusCodes.BadSecurityModeInsufficient: Quality.BAD_ACCESS_DENIED,
    StatusCodes.BadIdentityTokenRejected: Quality.BAD_ACCESS_DENIED,
    StatusCodes.BadIdentityTokenInvalid: Quality.BAD_ACCESS_DENIED,
    StatusCodes.BadNotWritable: Quality.BAD_READ_ONLY,
    StatusCodes.BadNotConnected: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadServerNotConnected: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadCommunicationError: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadConnectionClosed: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadShutdown: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadServerHalted: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadSessionClosed: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadSessionIdInvalid: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadSecureChannelClosed: Quality.BAD_NOT_CONNECTED,
    StatusCodes.BadTimeout: Quality.ERROR_TIMEOUT_EXPIRED,
    StatusCodes.BadRequestTimeout: Quality.ERROR_TIMEOUT_EXPIRED,
    StatusCodes.BadTypeMismatch: Quality.ERROR_TYPE_CONVERSION,
    StatusCodes.BadOutOfRange: Quality.BAD_OUT_OF_RANGE,
    StatusCodes.BadDeviceFailure: Quality.BAD_DEVICE_ERROR,
    StatusCodes.BadSensorFailure: Quality.BAD_DEVICE_ERROR,
    StatusCodes.BadWaitingForInitialData: Quality.BAD_NOT_CONNECTED,
}

# Codes meaning "this session or connection is gone": the connection is dropped and re-made.
SESSION_LOST_CODES = frozenset({
    StatusCodes.BadSessionClosed,
    StatusCodes.BadSessionIdInvalid,
    StatusCodes.BadSessionNotActivated,
    StatusCodes.BadSecureChannelClosed,
    StatusCodes.BadSecureChannelIdInvalid,
    StatusCodes.BadConnectionClosed,
    StatusCodes.BadShutdown,
    StatusCodes.BadServerHalted,
    StatusCodes.BadNoSubscription,
    StatusCodes.BadSubscriptionIdInvalid,
})


def status_name(code: int) -> str:
    return ua.StatusCode(ua.UInt32(code)).name


def quality_of(code: int) -> Quality:
    """Ignition quality for an OPC UA status code."""
    status = ua.StatusCode(ua.UInt32(code))
    if status.is_good():
        return Quality.GOOD
    if status.is_uncertain():
        return Quality.UNCERTAIN
    return _QUALITIES.get(code & 0xFFFF0000, Quality.BAD)


def _seconds(stamp: datetime | None) -> float | None:
    if stamp is None:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    seconds = stamp.timestamp()
    return seconds if seconds > 0 else None  # the OPC UA "null" time (1601) means no timestamp


def tidy_float32(value: float) -> float:
    """The shortest decimal that is the same Float32 (1.100000023841858 -> 1.1), as Ignition shows it."""
    if not math.isfinite(value):
        return value
    for digits in range(6, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == value:
            return candidate
    return value


def plain(value: Any, variant_type: ua.VariantType | None = None) -> Any:
    """A JSON-friendly Python value for an OPC UA value."""
    if isinstance(value, list):
        return [plain(item, variant_type) for item in value]
    if variant_type == ua.VariantType.Float and isinstance(value, float):
        return tidy_float32(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return value.replace(tzinfo=value.tzinfo or UTC).isoformat()
    if isinstance(value, ua.LocalizedText):
        return value.Text
    if isinstance(value, ua.QualifiedName):
        return value.Name
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (ua.NodeId, uuid.UUID)):
        return value.to_string() if isinstance(value, ua.NodeId) else str(value)
    return str(value)


def to_qualified(data_value: ua.DataValue, where: str = "") -> QualifiedValue:
    """A QualifiedValue for a DataValue: value only when Good, source (else server) timestamp.

    A bad one carries ``error``: ``where`` (device and address) and the status code name.
    """
    code = data_value.StatusCode.value if data_value.StatusCode is not None else 0
    quality = quality_of(code)
    stamp = _seconds(data_value.SourceTimestamp) or _seconds(data_value.ServerTimestamp)
    if quality is not Quality.GOOD:
        name = status_name(code)
        return QualifiedValue.bad(quality, stamp, f"{where}: {name}" if where else name)
    variant = data_value.Value
    value = plain(variant.Value, variant.VariantType) if variant is not None else None
    return QualifiedValue.good(value, stamp)
