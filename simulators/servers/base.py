"""What every simulated protocol server offers: points, values, and faults for tests.

A server is built from :class:`SimPoint` s whose ``address`` is written exactly as a tag's address in
the Exchange config for that protocol (Modbus ``HRF1``, OPC UA ``ns=2;s=Line1.Tank.Level``, Logix
``Tank_Level``), so a simulated plant and its printed config cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from exchange._values import DataType


@dataclass(frozen=True)
class SimPoint:
    address: str
    data_type: DataType
    initial: Any = 0
    writable: bool = True
    array: bool = False  # a one-dimensional array of data_type (``initial`` a list); OPC UA only
    length: int | None = None  # a fixed array's length, declared by its node (None: it varies)


class SimServer(Protocol):
    """A protocol server on 127.0.0.1 (or ``host``) running in a background thread or process."""

    host: str
    port: int  # the real port once started (0 asks for a free one)

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def restart(self) -> None:
        """Stop and start again on the same port (clients see the connection drop)."""
        ...

    def get(self, address: str) -> Any:
        """The server-side value of the point at ``address``."""
        ...

    def set(self, address: str, value: Any) -> None:
        """Change the value server-side, as the PLC program would."""
        ...

    def write_count(self, address: str | None = None) -> int:
        """How many client write requests reached the server (for one address, or all)."""
        ...

    def drop_connections(self) -> None:
        """Close every client connection without stopping the server."""
        ...
