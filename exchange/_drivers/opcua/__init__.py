"""OPC UA servers (asyncua): ``driver = "opcua"``.

- :mod:`.protocol`: :data:`OPCUA`, what the registry hands the tag layer (create, address checks);
- :mod:`.driver`: :class:`OpcUaDriver`, the synchronous, thread-safe face of the connection;
- :mod:`.session`: the connection on the driver's event loop: reconnects, reads, writes, subscriptions;
- :mod:`.connection`, :mod:`.subscriptions`, :mod:`.loop`: one connection attempt, subscriptions that
  outlive connections, the event loop thread;
- :mod:`.values`: NodeId addresses, status codes as qualities, read values;
  :mod:`.encode`: written values as variants of the node's type;
- :mod:`.settings`: the ``[devices.NAME]`` keys (security, certificates, login).

Importing this package imports asyncua; the registry does it only for a configured OPC UA device.
"""

from __future__ import annotations

from exchange._drivers.opcua.driver import OpcUaDriver, OpcUaSubscription
from exchange._drivers.opcua.protocol import OPCUA, OpcUaProtocol

__all__ = ["OPCUA", "OpcUaDriver", "OpcUaProtocol", "OpcUaSubscription"]
