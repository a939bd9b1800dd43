"""OPC UA method calls: the method found on its object, its arguments typed from its signature.

A call is made in two steps, so that nothing goes out before every argument is checked:

1. :func:`prepare` (no side effect): find the method, by its browse name among the object's
   components (``"Load"``) or by its NodeId (``"ns=2;s=Line1.Recipe.Load"``); read its
   ``InputArguments`` (name, data type, value rank) and ``OutputArguments`` (names) once per
   connection; convert each argument by Exchange's rules for its type (:mod:`.encode`), a list
   for an array argument. A wrong count is an InvalidArgument naming the method's signature; a
   value that does not fit is a TagTypeError/TagRangeError naming the argument.
2. :func:`send`: one Call request. A Bad status on the call is a DeviceError carrying the status
   (``status_code``, ``status_name``) and each refused argument's own status; the output
   arguments come back as plain values.

An object without the method, or a method without InputArguments taking arguments, is refused in
step 1. A server that does not check argument types itself still gets exactly the declared types
(a bare Python int would otherwise travel as Int64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asyncua import ua
from asyncua.ua.object_ids import ObjectIds

from exchange._drivers.opcua.encode import to_variant
from exchange._drivers.opcua.values import NodeAddress, parse_node_id, plain, status_name
from exchange.errors import DeviceError, InvalidArgument, TagPathError

if TYPE_CHECKING:
    from exchange._drivers.opcua.connection import Connection


@dataclass(frozen=True)
class Argument:
    """One input argument as the method declares it."""

    name: str
    variant_type: ua.VariantType
    value_rank: int

    def describe(self) -> str:
        return f"{self.name}: {self.variant_type.name}" + ("[]" if self.value_rank >= 0 else "")


@dataclass(frozen=True)
class Signature:
    method_id: ua.NodeId
    name: str
    inputs: tuple[Argument, ...]
    outputs: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.name}({', '.join(a.describe() for a in self.inputs)})"


@dataclass(frozen=True)
class PreparedCall:
    """A call ready to send: every argument already a Variant of its declared type."""

    object_id: ua.NodeId
    object_text: str
    signature: Signature
    arguments: tuple[ua.Variant, ...]

    @property
    def what(self) -> str:
        return f"{self.signature.name} on {self.object_text}"


class RefusedCall(DeviceError):
    """The server answered the call with a Bad status (``status_code``, ``status_name``).

    Picklable as the step records it (``status_code`` has a default so that unpickling, which
    calls the class with the message alone, then restores the attributes)."""

    def __init__(self, message: str, status_code: int = 0) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.status_name = status_name(status_code)


async def prepare(conn: Connection, target: str, address: NodeAddress, object_id: ua.NodeId, method: str,
                  args: Sequence[Any]) -> PreparedCall:
    """Step 1 of the module doc; asyncua's errors propagate (the session translates them)."""
    signature = await _signature(conn, target, address, object_id, method)
    if len(args) != len(signature.inputs):
        raise InvalidArgument(
            f"{target}: method {signature.describe()} on {address.text} takes {len(signature.inputs)} "
            f"argument(s), got {len(args)}"
        )
    variants = tuple(
        to_variant(value, spec.variant_type, None,
                   f"{target}: argument {index + 1} {spec.name!r} of {signature.name} on {address.text}",
                   value_rank=spec.value_rank)
        for index, (spec, value) in enumerate(zip(signature.inputs, args, strict=True))
    )
    return PreparedCall(object_id, address.text, signature, variants)


async def send(conn: Connection, target: str, call: PreparedCall) -> list[Any]:
    """Step 2: the Call request; the output arguments as plain values, or RefusedCall."""
    request = ua.CallMethodRequest(ObjectId=call.object_id, MethodId=call.signature.method_id,
                                   InputArguments=list(call.arguments))
    [result] = await conn.client.uaclient.call([request])
    code = result.StatusCode.value if result.StatusCode is not None else 0
    if ua.StatusCode(ua.UInt32(code)).is_bad():
        refused = [
            f"argument {i + 1} {spec.name!r}: {status.name}"
            for i, (spec, status) in enumerate(zip(call.signature.inputs, result.InputArgumentResults or []))
            if status is not None and not status.is_good()
        ]
        detail = f"; {', '.join(refused)}" if refused else ""
        raise RefusedCall(
            f"{target} refused the call of {call.what}: {status_name(code)} (0x{code:08X}){detail}", code
        )
    return [plain(v.Value, v.VariantType) for v in result.OutputArguments or []]


async def _signature(conn: Connection, target: str, address: NodeAddress, object_id: ua.NodeId,
                     method: str) -> Signature:
    key = (object_id, method)
    known = conn.methods.get(key)
    if known is not None:
        return known  # type: ignore[no-any-return]
    method_id, name = await _find_method(conn, target, address, object_id, method)
    inputs: tuple[Argument, ...] = ()
    outputs: tuple[str, ...] = ()
    properties = await conn.client.get_node(method_id).get_children_descriptions(refs=ObjectIds.HasProperty)
    for ref in properties:
        if ref.BrowseName.Name not in ("InputArguments", "OutputArguments"):
            continue
        declared = await conn.client.get_node(ref.NodeId).read_value() or []
        if ref.BrowseName.Name == "OutputArguments":
            outputs = tuple(str(arg.Name) for arg in declared)
            continue
        specs = []
        for arg in declared:
            variant_type = await conn.variant_type_of(arg.DataType)
            rank = arg.ValueRank if isinstance(arg.ValueRank, int) else -1
            specs.append(Argument(str(arg.Name), variant_type, rank))
        inputs = tuple(specs)
    signature = Signature(method_id, name, inputs, outputs)
    conn.methods[key] = signature
    return signature


async def _find_method(conn: Connection, target: str, address: NodeAddress, object_id: ua.NodeId,
                       method: str) -> tuple[ua.NodeId, str]:
    """The method's NodeId and the name messages use: by NodeId text, else by browse name."""
    if "=" in method:
        try:
            parsed = parse_node_id(method)
        except TagPathError as exc:
            raise InvalidArgument(
                f"{target}: method {method!r} is neither a browse name nor a NodeId: {exc}"
            ) from None
        [method_id] = await conn.resolve([parsed])
        if method_id is None:
            raise DeviceError(
                f"{target}: method {method!r}: namespace {parsed.namespace_uri!r} is not on the server"
            )
        return method_id, method
    refs = await conn.client.get_node(object_id).get_children_descriptions(
        refs=ObjectIds.HasComponent, nodeclassmask=ua.NodeClass.Method
    )
    for ref in refs:
        if ref.BrowseName.Name == method:
            return ref.NodeId, method
    names = ", ".join(sorted(str(ref.BrowseName.Name) for ref in refs)) or "none"
    raise InvalidArgument(f"{target}: object {address.text} has no method {method!r} (its methods: {names})")
