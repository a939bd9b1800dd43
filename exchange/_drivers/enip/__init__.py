"""EtherNet/IP Logix controllers (pycomm3): ``driver = "enip"``.

- :mod:`.protocol`: :data:`ENIP`, what the registry hands the tag layer (create, address checks);
- :mod:`.driver`: :class:`EnipDriver`, reads and writes packed into Multiple Service Packets;
- :mod:`.link`: the connection, the duplicate-write guard, reconnect backoff;
- :mod:`.tags`: Logix symbolic addresses and the tag definitions given when the list cannot be uploaded;
- :mod:`.settings`: the ``[devices.NAME]`` keys.

Importing this package imports pycomm3; the registry does it only for a configured EtherNet/IP device.
"""

from __future__ import annotations

from exchange._drivers.enip.driver import EnipDriver
from exchange._drivers.enip.protocol import ENIP, EnipProtocol

__all__ = ["ENIP", "EnipDriver", "EnipProtocol"]
