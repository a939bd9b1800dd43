"""OPC UA servers (asyncua): ``driver = "opcua"``.

- :mod:`.protocol`: :data:`OPCUA`, what the registry hands the tag layer (create, address checks);
- :mod:`.addresses`: NodeId addresses checked without asyncua (the gateway's start-up checks);
- :mod:`.driver`: :class:`OpcUaDriver`, the synchronous, thread-safe face of the connection;
- :mod:`.session`: the connection on the driver's event loop: reconnects, reads, writes, subscriptions;
- :mod:`.connection`, :mod:`.subscriptions`, :mod:`.loop`: one connection attempt, subscriptions that
  outlive connections, the event loop thread;
- :mod:`.values`: NodeId addresses, status codes as qualities, read values;
  :mod:`.encode`: written values as variants of the node's type;
- :mod:`.settings`: the ``[devices.NAME]`` keys (security, certificates, login).

Importing this package imports neither asyncua nor cryptography: the checks of a configured device's
settings and addresses need neither (a certificate in the settings loads cryptography); asyncua
comes with :mod:`.driver`, when the first driver is made (the tag layer makes it at first use).
"""

from __future__ import annotations

from exchange._drivers.opcua.protocol import OPCUA, OpcUaProtocol

__all__ = ["OPCUA", "OpcUaProtocol"]
