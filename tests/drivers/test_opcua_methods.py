"""OPC UA arrays and method calls through the tag layer, against an asyncua server with both.

Arrays: read as lists, written whole as the node's type (element by element conversion, refused
before sending when the shape or an element does not fit), confirmed by comparing whole arrays.
Methods: found by browse name or NodeId, arguments typed from the method's InputArguments (as the
server received them), outputs returned, a refused call's status code in the error.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from asyncua.ua.status_codes import StatusCodes

from exchange._config import config_from_dict
from exchange._drivers.opcua.methods import RefusedCall
from exchange._tags.service import TagService
from exchange.errors import (
    DeviceError,
    InvalidArgument,
    ReadOnlyTag,
    TagError,
    TagRangeError,
    TagTypeError,
    WriteInDoubt,
)
from tests.drivers.opcua_methods_server import INITIAL_ARRAYS, MethodsServer
from tests.tags.heard import Heard

TAGS: dict[str, dict[str, Any]] = {
    "[m]Recipe": {"device": "line", "address": "ns=2;s=Line1.Recipe"},
    "[m]RecipeRo": {"device": "line", "address": "ns=2;s=Line1.Recipe", "access": "ro"},
    "[m]Profile": {"device": "line", "address": "ns=2;s=Line1.Profile"},  # untyped: the node decides
    "[m]Counts": {"device": "line", "address": "ns=2;s=Line1.Counts", "type": "Int32[]", "min": 0},
    "[m]Names": {"device": "line", "address": "ns=2;s=Line1.Names", "type": "String[]"},
    "[m]Setpoints": {"device": "line", "address": "ns=2;s=Line1.Setpoints"},  # untyped: the node's 5 elements
    "[m]TypedSetpoints": {"device": "line", "address": "ns=2;s=Line1.Setpoints", "type": "Int16[]"},
    "[m]Declared": {"device": "line", "address": "ns=2;s=Line1.Counts", "type": "Int32[3]"},  # the tag's length
    "[m]Speed": {"device": "line", "address": "ns=2;s=Line1.Speed"},
    "[m]TypedSpeed": {"device": "line", "address": "ns=2;s=Line1.Speed", "type": "Float64"},
    "[m]Modbus": {"device": "plc", "address": "HR1"},
}


@pytest.fixture(scope="module")
def server() -> Iterator[MethodsServer]:
    made = MethodsServer().start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture
def svc(server: MethodsServer) -> Iterator[TagService]:
    for name, (_, values) in INITIAL_ARRAYS.items():
        server.set_value(name, values)
    server.busy = False
    devices = {"line": {"driver": "opcua", "url": server.url, "timeout_ms": 3000, "comm_timeout_s": 2},
               "plc": {"driver": "modbus", "host": "127.0.0.1", "port": 1}}
    made = TagService(config_from_dict({"devices": devices, "tags": TAGS}, env={}))
    try:
        yield made
    finally:
        made.close()


def test_arrays_are_read_as_lists(svc: TagService) -> None:
    profile, counts, names = svc.read(["[m]Profile", "[m]Counts", "[m]Names"])
    assert (profile.value, counts.value, names.value) == ([1.5, 2.5, 3.5], [1, 2, 3], ["a", "b"])


def test_arrays_are_written_whole_as_the_nodes_type(svc: TagService, server: MethodsServer) -> None:
    svc.write(["[m]Profile", "[m]Counts", "[m]Names"], [[0.5, 1, "2.25"], [4, 5.0, "6", 7], []])
    assert server.value("Line1.Profile") == [0.5, 1.0, 2.25]  # Float elements, from any number
    assert server.value("Line1.Counts") == [4, 5, 6, 7]  # a longer array than before
    assert server.value("Line1.Names") == []
    svc.write(["[m]Setpoints", "[m]Declared"], [[5, 4, 3, 2, 1], [7, 8, 9]])  # the lengths they declare
    assert server.value("Line1.Setpoints") == [5, 4, 3, 2, 1] and server.value("Line1.Counts") == [7, 8, 9]
    svc.wait_for_value("[m]Profile", [0.5, 1.0, 2.25], timeout_s=5)  # whole arrays compare
    with pytest.raises(Exception, match="did not reach"):
        svc.wait_for_value("[m]Profile", [0.5, 1.0], timeout_s=0.3)  # a shorter array is not equal


@pytest.mark.parametrize(
    ("path", "value", "error", "fragment"),
    [
        ("[m]Counts", [1, 2.5], TagTypeError, "element [1]: 2.5 is not a whole number"),
        ("[m]Counts", [1, -4], TagRangeError, "element [1]: -4 is below the tag's min 0"),
        ("[m]Counts", [1, 2**31], TagRangeError, "outside the Int32 range"),
        ("[m]Counts", 3, TagTypeError, "is an array (Int32[]): write a list"),
        ("[m]TypedSpeed", [1.0], TagTypeError, 'one value, but got a list of 1; an array tag says type = "Float64[]"'),
        ("[m]Profile", 2.0, TagTypeError, "the node holds an array of Float; write a list"),
        ("[m]Profile", [1.0, "fast"], TagTypeError, "element [1]"),
        ("[m]Speed", [1.0, 2.0], TagTypeError, "the node holds one Double, not an array"),
        ("[m]Profile", [[1.0]], TagTypeError, "arrays are one dimension"),
        ("[m]Setpoints", [1, 2, 3, 4, 5, 6], TagRangeError,
         "tag '[m]Setpoints' (OPC UA device 'line', address ns=2;s=Line1.Setpoints): the node holds 5 elements "
         "(its ArrayDimensions), got a list of 6"),
        ("[m]Setpoints", [], TagRangeError, "the node holds 5 elements (its ArrayDimensions), got a list of 0"),
        ("[m]TypedSetpoints", [1, 2, 3, 4], TagRangeError, "the node holds 5 elements (its ArrayDimensions), got a "
         "list of 4"),
        ("[m]Declared", [1, 2, 3, 4], TagRangeError,
         "tag '[m]Declared' (device 'line', address 'ns=2;s=Line1.Counts') holds 3 elements (type = \"Int32[3]\"), "
         "got a list of 4; nothing was written"),
        ("[m]Declared", [], TagRangeError, 'holds 3 elements (type = "Int32[3]"), got a list of 0'),
    ],
)
def test_a_bad_array_write_is_refused_before_anything_is_sent(
    svc: TagService, server: MethodsServer, path: str, value: Any, error: type[Exception], fragment: str
) -> None:
    before = {name: server.value(name) for name in INITIAL_ARRAYS}
    with pytest.raises(error) as refused:
        svc.write([path, "[m]Names"], [value, ["x"]])
    assert fragment in str(refused.value)
    assert {name: server.value(name) for name in INITIAL_ARRAYS} == before  # not even the good one


def test_a_method_is_called_with_arguments_typed_from_its_signature(svc: TagService, server: MethodsServer) -> None:
    server.calls.made.clear()
    heard = Listener()
    outputs = svc.call("[m]Recipe", "Load", ["RCP-7", 3, [1, 2.5]], listener=heard)
    assert outputs == [True, server.batches]
    # a bare 3 would travel as Int64 and [1, 2.5] as a mixed list: they went as the method declares
    assert server.calls.made == [("Load", [("RCP-7", "String"), (3, "Int32"), ([1.0, 2.5], "Double")])]
    assert heard.events == [("called", "[m]Recipe", "Load", ["RCP-7", 3, [1, 2.5]], outputs)]
    assert svc.call("[m]Recipe", "ns=2;s=Line1.Recipe.Ack", []) == []  # by NodeId; no arguments, no outputs
    assert server.calls.made[-1] == ("Ack", [])


@pytest.mark.parametrize(
    ("path", "method", "args", "error", "fragment"),
    [
        ("[m]Recipe", "Load", ["RCP-7", 3], InvalidArgument,
         "method Load(RecipeId: String, Quantity: Int32, Profile: Double[]) on ns=2;s=Line1.Recipe takes 3 "
         "argument(s), got 2"),
        ("[m]Recipe", "Load", ["RCP-7", "three", [1.0]], TagTypeError, "argument 2 'Quantity' of Load"),
        ("[m]Recipe", "Load", ["RCP-7", 2**40, [1.0]], TagRangeError, "argument 2 'Quantity' of Load"),
        ("[m]Recipe", "Load", ["RCP-7", 3, 1.0], TagTypeError, "argument 3 'Profile' of Load"),
        ("[m]Recipe", "Lod", [], InvalidArgument, "has no method 'Lod' (its methods: Ack, Load)"),
        ("[m]RecipeRo", "Ack", [], ReadOnlyTag, 'read-only (access = "ro")'),
        ("[m]Modbus", "Ack", [], TagError, "has no methods to call (method calls are OPC UA's)"),
    ],
)
def test_a_call_that_cannot_be_made_as_asked_is_refused_before_it_is_sent(
    svc: TagService, server: MethodsServer, path: str, method: str, args: list[Any], error: type[Exception],
    fragment: str,
) -> None:
    server.calls.made.clear()
    with pytest.raises(error) as refused:
        svc.call(path, method, args)
    assert fragment in str(refused.value)
    assert server.calls.made == []


def test_a_refused_call_carries_the_servers_status_code(svc: TagService, server: MethodsServer) -> None:
    heard = Listener()
    with pytest.raises(DeviceError) as refused:
        svc.call("[m]Recipe", "Load", ["RCP-7", 0, [1.0]], listener=heard)
    assert isinstance(refused.value, RefusedCall)
    assert refused.value.status_code == StatusCodes.BadOutOfRange
    assert "refused the call of Load on ns=2;s=Line1.Recipe: BadOutOfRange (0x803C0000)" in str(refused.value)
    recorded = pickle.loads(pickle.dumps(refused.value))  # as a run's record keeps it for a replay
    assert (type(recorded), recorded.status_code, str(recorded)) == (
        RefusedCall, StatusCodes.BadOutOfRange, str(refused.value))
    server.busy = True
    with pytest.raises(DeviceError, match=r"BadInvalidState \(0x80AF0000\)"):
        svc.call("[m]Recipe", "Load", ["RCP-7", 2, [1.0]], listener=heard)
    assert [e[0] for e in heard.events] == ["call_failed", "call_failed"]


def test_a_call_whose_answer_is_lost_is_never_made_again(
    svc: TagService, server: MethodsServer, mocker: Any
) -> None:
    from exchange._drivers.opcua import methods

    real_send = methods.send

    async def answer_lost(*args: Any) -> Any:  # the fault, at the library boundary: the call ran, no answer came
        await real_send(*args)
        raise TimeoutError

    mocker.patch.object(methods, "send", answer_lost)
    server.calls.made.clear()
    heard = Listener()
    with pytest.raises(WriteInDoubt, match="in doubt .* not made again"):
        svc.call("[m]Recipe", "Load", ["RCP-7", 3, [1.0]], listener=heard)
    assert len(server.calls.made) == 1
    assert [e[0] for e in heard.events] == ["call_in_doubt"]


def test_a_call_resumed_after_a_crash_is_in_doubt_and_not_made(svc: TagService, server: MethodsServer) -> None:
    server.calls.made.clear()
    with pytest.raises(WriteInDoubt, match="cannot be read back"):
        svc.call("[m]Recipe", "Ack", [], resumed_in_doubt="an earlier execution stopped while sending")
    assert server.calls.made == []


class Listener(Heard):
    """Heard, plus the method-call events: (kind, tag path, method, args, outputs or error)."""

    def called(self, tag: Any, method: str, args: Any, outputs: list[Any]) -> None:
        self.events.append(("called", tag.path, method, list(args), outputs))  # type: ignore[arg-type]

    def call_in_doubt(self, tag: Any, method: str, args: Any, error: str) -> None:
        self.events.append(("call_in_doubt", tag.path, method, list(args), error))  # type: ignore[arg-type]

    def call_failed(self, tag: Any, method: str, args: Any, error: str) -> None:
        self.events.append(("call_failed", tag.path, method, list(args), error))  # type: ignore[arg-type]
