"""OPC UA NodeId addresses as a config writes them, checked without asyncua.

``ns=2;s=Line1.Tank.Level``, ``ns=2;i=1001``, ``nsu=urn:x;s=A.B``, ``ns=1;g=<guid>``,
``ns=1;b=<base64>``: :func:`parse_node_id_text` splits one into its parts or raises
:class:`~exchange.errors.TagPathError` naming the address and the fault. The gateway checks every
configured address at start-up with it, before it recovers a run, so that check does not import
asyncua (over half a second here); the driver builds the protocol's NodeId from the parts when it
first talks to the device (:func:`exchange._drivers.opcua.values.parse_node_id`).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from dataclasses import dataclass

from exchange.errors import TagPathError

_ADDRESS = re.compile(r"^(?:(?:ns=(?P<ns>[^;]*)|nsu=(?P<nsu>[^;]*));)?(?P<kind>[isgb])=(?P<ident>.*)$", re.DOTALL)
_EXAMPLE = "expected e.g. ns=2;s=Line1.Tank.Level or ns=2;i=1001"


@dataclass(frozen=True)
class NodeIdText:
    """A checked NodeId address: ``kind`` is ``i`` (numeric), ``s`` (string), ``g`` (GUID) or ``b``
    (bytes), and ``identifier`` an int, str, UUID or bytes to match; ``namespace_uri`` is set (and
    ``namespace_index`` 0) for ``nsu=`` addresses."""

    text: str
    namespace_index: int
    namespace_uri: str | None
    kind: str
    identifier: int | str | uuid.UUID | bytes


def parse_node_id_text(address: str) -> NodeIdText:
    """Check an OPC UA NodeId address; raise :class:`TagPathError` naming the address and the fault."""
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
    identifier: int | str | uuid.UUID | bytes
    if kind == "i":
        if not ident.isdigit() or int(ident) > 0xFFFFFFFF:
            raise TagPathError(
                f"OPC UA address {address!r}: numeric identifier {ident!r} is not a number 0..4294967295"
            )
        identifier = int(ident)
    elif kind == "s":
        identifier = ident
    elif kind == "g":
        try:
            identifier = uuid.UUID(ident)
        except ValueError:
            raise TagPathError(f"OPC UA address {address!r}: {ident!r} is not a GUID") from None
    else:
        try:
            identifier = base64.b64decode(ident, validate=True)
        except (binascii.Error, ValueError):
            raise TagPathError(f"OPC UA address {address!r}: {ident!r} is not base64") from None
    return NodeIdText(text, index, uri, kind, identifier)
