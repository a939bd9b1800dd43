"""OPC UA addresses, status codes and values, translated to and from Exchange's terms.

- :func:`parse_node_id` turns an address (``ns=2;s=Line1.Tank.Level``, ``ns=2;i=1001``,
  ``nsu=urn:x;s=A.B``, ``ns=1;g=<guid>``, ``ns=1;b=<base64>``) into a :class:`NodeAddress`.
- :func:`quality_of` maps an OPC UA status code to Ignition's quality names.
- :func:`to_qualified` turns a DataValue into a :class:`QualifiedValue`.

Values going the other way (a write) are :mod:`exchange._drivers.opcua.encode`'s.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asyncua import ua
from asyncua.ua.status_codes import StatusCodes

from exchange._values import QualifiedValue, Quality
from exchange.errors import TagPathError

_ADDRESS = re.compile(r"^(?:(?:ns=(?P<ns>[^;]*)|nsu=(?P<nsu>[^;]*));)?(?P<kind>[isgb])=(?P<ident>.*)$", re.DOTALL)
_EXAMPLE = "expected e.g. ns=2;s=Line1.Tank.Level or ns=2;i=1001"


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
    """Parse an OPC UA NodeId address; raise :class:`TagPathError` naming the address and the fault."""
    if not isinstance(address, str):
        raise TagPathError(f"OPC UA address {address!r} must be a string ({_EXAMPLE})")
    text = address.strip()
    match = _ADDRESS.match(text)
    if match is None:
        raise TagPathError(f"OPC UA address {address!r} is not a NodeId ({_EXAMPLE})")
    ns_text, uri, kind, ident = match.group("ns", "nsu", "kind", "ident")
    if ident == "":
        raise TagPathError(f"OPC UA address {address!r} has an empty identifier ({_EXAMPLE})")
    index = 0
    if ns_text is not None:
        if not ns_text.isdigit() or int(ns_text) > 0xFFFF:
            raise TagPathError(
                f"OPC UA address {address!r}: namespace index {ns_text!r} is not a number 0..65535"
            )
        index = int(ns_text)
    if uri is not None and not uri.strip():
        raise TagPathError(f"OPC UA address {address!r}: nsu= needs a namespace URI")
    identifier: Any
    node_type: ua.NodeIdType
    if kind == "i":
        if not ident.isdigit() or int(ident) > 0xFFFFFFFF:
            raise TagPathError(
                f"OPC UA address {address!r}: numeric identifier {ident!r} is not a number 0..4294967295"
            )
        identifier, node_type = int(ident), ua.NodeIdType.Numeric
    elif kind == "s":
        identifier, node_type = ident, ua.NodeIdType.String
    elif kind == "g":
        try:
            identifier, node_type = uuid.UUID(ident), ua.NodeIdType.Guid
        except ValueError:
            raise TagPathError(f"OPC UA address {address!r}: {ident!r} is not a GUID") from None
    else:
        try:
            identifier = base64.b64decode(ident, validate=True)
        except (binascii.Error, ValueError):
            raise TagPathError(f"OPC UA address {address!r}: {ident!r} is not base64") from None
        node_type = ua.NodeIdType.ByteString
    return NodeAddress(text, ua.NodeId(identifier, ua.Int16(index), node_type), uri)


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
