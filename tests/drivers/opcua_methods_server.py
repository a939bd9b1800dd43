"""An asyncua server with methods and array nodes: the device under test for OPC UA methods and arrays.

Built directly on asyncua (not the project's simulator), small and reusable:

- ``ns=2;s=Line1.Recipe`` (an object) with the method ``Load(RecipeId: String, Quantity: Int32,
  Profile: Double[]) -> (Accepted: Boolean, Batch: UInt32)``. It refuses a Quantity below 1 with
  BadOutOfRange, and any call while ``busy`` is set with BadInvalidState, as a PLC refuses a
  recipe during a batch. Every call it runs is kept with the variant types it received, so a test
  sees the arguments as they travelled.
- ``Ack()`` on the same object: no arguments, no outputs.
- Writable arrays ``ns=2;s=Line1.Profile`` (Float[]), ``ns=2;s=Line1.Counts`` (Int32[]),
  ``ns=2;s=Line1.Names`` (String[]), whose length varies (no ArrayDimensions); ``ns=2;s=Line1.Setpoints``
  (Int16[5]: its ArrayDimensions declares 5 elements, as a PLC's array); a scalar ``ns=2;s=Line1.Speed``
  (Double).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asyncua import Server, ua
from asyncua.ua.object_ids import ObjectIds

from exchange._drivers.opcua.loop import LoopThread

NAMESPACE = "urn:exchange:test:methods"
INITIAL_ARRAYS: dict[str, tuple[ua.VariantType, list[Any]]] = {
    "Line1.Profile": (ua.VariantType.Float, [1.5, 2.5, 3.5]),
    "Line1.Counts": (ua.VariantType.Int32, [1, 2, 3]),
    "Line1.Names": (ua.VariantType.String, ["a", "b"]),
    "Line1.Setpoints": (ua.VariantType.Int16, [10, 20, 30, 40, 50]),
}
FIXED_LENGTH = {"Line1.Setpoints"}  # declared in ArrayDimensions


@dataclass
class Calls:
    """What the methods received: (method, [(value, variant type name), ...])."""

    made: list[tuple[str, list[tuple[Any, str]]]] = field(default_factory=list)


def _argument(name: str, data_type: int, value_rank: int = -1) -> ua.Argument:
    arg = ua.Argument()
    arg.Name = name
    arg.DataType = ua.NodeId(data_type)
    arg.ValueRank = value_rank
    arg.ArrayDimensions = [0] if value_rank == 1 else []
    return arg


class MethodsServer:
    """Start with :meth:`start`; ``url``; :meth:`value` / :meth:`set_value` on the server's side."""

    def __init__(self) -> None:
        self.calls = Calls()
        self.busy = False
        self.batches = 0
        self._thread: LoopThread | None = None
        self._server: Server | None = None
        self._index = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"opc.tcp://127.0.0.1:{self.port}/methods/"

    def start(self) -> MethodsServer:
        self._thread = LoopThread("opcua-methods-server")
        self._server = self._thread.run(self._build(), 30.0)
        return self

    async def _build(self) -> Server:
        server = Server()
        server.disable_clock()
        await server.init()
        server.set_endpoint("opc.tcp://127.0.0.1:0/methods/")
        index = self._index = await server.register_namespace(NAMESPACE)
        assert index == 2, index
        objects = server.nodes.objects
        recipe = await objects.add_object(ua.NodeId("Line1.Recipe", index), ua.QualifiedName("Recipe", index))
        await recipe.add_method(
            ua.NodeId("Line1.Recipe.Load", index), ua.QualifiedName("Load", index), self._load,
            [_argument("RecipeId", ObjectIds.String), _argument("Quantity", ObjectIds.Int32),
             _argument("Profile", ObjectIds.Double, 1)],
            [_argument("Accepted", ObjectIds.Boolean), _argument("Batch", ObjectIds.UInt32)],
        )
        await recipe.add_method(ua.NodeId("Line1.Recipe.Ack", index), ua.QualifiedName("Ack", index), self._ack, [], [])
        for name, (variant_type, values) in INITIAL_ARRAYS.items():
            node = await objects.add_variable(ua.NodeId(name, index), ua.QualifiedName(name, index),
                                              ua.Variant(values, variant_type, is_array=True))
            await node.write_attribute(ua.AttributeIds.ValueRank, ua.DataValue(ua.Variant(1, ua.VariantType.Int32)))
            if name in FIXED_LENGTH:
                await node.write_attribute(ua.AttributeIds.ArrayDimensions, ua.DataValue(
                    ua.Variant([len(values)], ua.VariantType.UInt32, is_array=True)))
            await node.set_writable()
        speed = await objects.add_variable(ua.NodeId("Line1.Speed", index), ua.QualifiedName("Speed", index),
                                           ua.Variant(0.0, ua.VariantType.Double))
        await speed.set_writable()
        await server.start()
        assert server.bserver is not None
        self.port = server.bserver.port
        return server

    async def _load(self, parent: ua.NodeId, recipe: ua.Variant, quantity: ua.Variant, profile: ua.Variant) -> Any:
        received = [(v.Value, v.VariantType.name) for v in (recipe, quantity, profile)]
        if self.busy:
            return ua.StatusCode(ua.StatusCodes.BadInvalidState)
        if quantity.Value < 1:
            return ua.StatusCode(ua.StatusCodes.BadOutOfRange)
        self.calls.made.append(("Load", received))
        self.batches += 1
        return [ua.Variant(True, ua.VariantType.Boolean), ua.Variant(self.batches, ua.VariantType.UInt32)]

    async def _ack(self, parent: ua.NodeId) -> list[ua.Variant]:
        self.calls.made.append(("Ack", []))
        return []

    def value(self, name: str) -> Any:
        assert self._thread is not None and self._server is not None
        server = self._server
        return self._thread.run(server.get_node(ua.NodeId(name, self._index)).read_value(), 10.0)

    def set_value(self, name: str, values: list[Any]) -> None:
        assert self._thread is not None and self._server is not None
        variant_type = INITIAL_ARRAYS[name][0]
        node = self._server.get_node(ua.NodeId(name, self._index))
        self._thread.run(node.write_value(ua.Variant(values, variant_type, is_array=True)), 10.0)

    def stop(self) -> None:
        if self._thread is None or self._server is None:
            return
        server, thread = self._server, self._thread
        self._server = self._thread = None
        try:
            thread.run(server.stop(), 10.0)
        finally:
            thread.stop()
