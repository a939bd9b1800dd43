"""Device drivers: one package per protocol behind the interfaces of :mod:`exchange._drivers.base`.

- :mod:`.base`: :class:`~exchange._drivers.base.Driver` (one device) and
  :class:`~exchange._drivers.base.DeviceProtocol` (one ``driver = "..."`` of the config);
- :mod:`.registry`: the config's names -> protocols, each imported only when a device uses it;
- :mod:`.modbus`, :mod:`.opcua`, :mod:`.enip`: the protocols;
- :mod:`.settings_reader`: typed reads of ``[devices.NAME]`` tables, shared by the protocols.

Drivers know devices, addresses and values (:mod:`exchange._values`); they never import the tag layer
or the engine. Nothing is imported here, so that importing one protocol never imports another.
"""
