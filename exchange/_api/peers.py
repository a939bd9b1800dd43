"""Who is at the other end of a request: the peer's address, or, when the peer is one of ``[api]
trusted_proxies``, the client that proxy names in ``X-Forwarded-For``.

The sign-in throttle counts per user name and this address, and the log names it. From any other
peer ``X-Forwarded-For`` is ignored: anyone can write the header, and believing it would let one
machine appear as many (a fresh throttle for every made-up address).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from fastapi import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
FORWARDED_FOR = "x-forwarded-for"
HOPS_MAX = 20  # a longer chain is not a proxy's doing: the header is cut there


class Peers:
    """The client address of requests, given the trusted proxies (addresses or CIDR networks)."""

    def __init__(self, trusted_proxies: Iterable[str] = ()) -> None:
        self.trusted: tuple[Network, ...] = tuple(ipaddress.ip_network(n, strict=False) for n in trusted_proxies)

    def is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    def client(self, request: Request) -> str:
        """The peer's address; behind trusted proxies, the address the nearest of them was
        connected from: ``X-Forwarded-For`` read from the right, past the trusted proxies. A
        malformed entry stops the reading at the last proxy that was trusted."""
        peer = request.client.host if request.client else ""
        if not self.trusted or not self.is_trusted(peer):
            return peer
        hops = [hop.strip() for value in request.headers.getlist(FORWARDED_FOR) for hop in value.split(",")]
        for hop in reversed(hops[-HOPS_MAX:]):
            try:
                address = str(ipaddress.ip_address(hop))
            except ValueError:
                return peer
            if not self.is_trusted(address):
                return address
            peer = address
        return peer


def client_of(request: Request) -> str:
    """The client address of a request to the application (see :class:`Peers`)."""
    peers: Peers = request.app.state.peers
    return peers.client(request)
