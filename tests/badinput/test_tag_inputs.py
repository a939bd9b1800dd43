"""Bad inputs to the tag steps, in real runs against a real Modbus server.

Each case is refused before anything is sent: the run fails with the error class named, the message
names the thing that is wrong, the step ran once (a refused check is never retried), the device got
no write at all and kept its values, and the audit trail holds no tag write.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._values import DataType
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.steps.conftest import StepEngine

POINTS = [
    SimPoint("C1", DataType.BOOLEAN, False),
    SimPoint("HRF1", DataType.FLOAT32, 40.0),
    SimPoint("HRF3", DataType.FLOAT32, 10.0),
    SimPoint("HR5", DataType.INT16, 321),
    SimPoint("IR1", DataType.INT16, 7),
]
TAGS = {
    "[plant]Valve/Cmd": {"device": "plc", "address": "C1"},
    "[plant]Tank/Level": {"device": "plc", "address": "HRF1", "access": "ro"},
    "[plant]Tank/Setpoint": {"device": "plc", "address": "HRF3", "min": 0, "max": 100},
    "[plant]Mixer/Speed": {"device": "plc", "address": "HR5"},
    "[plant]Tank/Flow": {"device": "plc", "address": "IR1"},
}
SPEED, VALVE, SETPOINT = "[plant]Mixer/Speed", "[plant]Valve/Cmd", "[plant]Tank/Setpoint"

# id -> (step, args, kwargs, error class, fragments the message must hold)
CASES: dict[str, tuple[str, tuple[Any, ...], dict[str, Any], str, tuple[str, ...]]] = {
    "bool-to-int16": ("write", (SPEED, True), {}, "TagTypeError", (SPEED, "True is a boolean", "bool_numbers")),
    "false-to-int16": ("write", (SPEED, False), {}, "TagTypeError", (SPEED, "is a boolean")),
    "bool-to-float32": ("write", (SETPOINT, True), {}, "TagTypeError", (SETPOINT, "is a boolean")),
    "one-to-bool": ("write", (VALVE, 1), {}, "TagTypeError", (VALVE, "1 is a number, not a boolean")),
    "zero-float-to-bool": ("write", (VALVE, 0.0), {}, "TagTypeError", (VALVE, "is a number")),
    "two-to-bool": ("write", (VALVE, 2), {}, "TagTypeError", (VALVE, "not a boolean")),
    "word-to-bool": ("write", (VALVE, "maybe"), {}, "TagTypeError", (VALVE, "'maybe'")),
    "int16-overflow": ("write", (SPEED, 70000), {}, "TagRangeError", (SPEED, "70000", "Int16 range")),
    "huge-int": ("write", (SPEED, 10**30), {}, "TagRangeError", (SPEED, "Int16 range")),
    "above-max": ("write", (SETPOINT, 101), {}, "TagRangeError", (SETPOINT, "above the tag's max 100")),
    "below-min": ("write", (SETPOINT, -1), {}, "TagRangeError", (SETPOINT, "below the tag's min 0")),
    "nan": ("write", (SETPOINT, math.nan), {}, "TagRangeError", (SETPOINT, "not a finite number")),
    "inf": ("write", (SETPOINT, math.inf), {}, "TagRangeError", (SETPOINT, "not a finite number")),
    "nan-text": ("write", (SETPOINT, "nan"), {}, "TagRangeError", (SETPOINT, "not a finite number")),
    "float32-overflow": ("write", (SETPOINT, 1e39), {}, "TagRangeError", (SETPOINT, "Float32 range")),
    "text-to-int": ("write", (SPEED, "abc"), {}, "TagTypeError", (SPEED, "'abc' is not a number")),
    "none-value": ("write", (SPEED, None), {}, "TagTypeError", (SPEED, "None is not a number")),
    "list-value": ("write", (SPEED, [1]), {}, "TagTypeError", (SPEED, "Int16, one value, but got a list of 1")),
    "dict-value": ("write", (SPEED, {"a": 1}), {}, "TagTypeError", (SPEED, "is not a boolean, number or string")),
    "fraction-to-int": ("write", (SPEED, 2.5), {}, "TagTypeError", (SPEED, "not a whole number")),
    "read-only-tag": ("write", ("[plant]Tank/Level", 5.0), {}, "ReadOnlyTag", ("[plant]Tank/Level", "read-only")),
    "input-register": ("write", ("[plant]Tank/Flow", 5), {}, "ReadOnlyTag", ("[plant]Tank/Flow", "cannot be written")),
    "path-none": ("write", (None, 5), {}, "InvalidArgument", ("tags.write", "path", "None")),
    "path-int": ("write", (5, 5), {}, "InvalidArgument", ("tags.write", "path", "got 5")),
    "path-empty-list": ("write", ([], []), {}, "InvalidArgument", ("tags.write", "path")),
    "path-no-provider": ("write", ("Mixer/Speed", 5), {}, "TagPathError", ("Mixer/Speed",)),
    "unknown-tag": ("write", ("[plant]Mixer/Sped", 5), {}, "UnknownTag", ("[plant]Mixer/Sped", "did you mean")),
    "list-with-scalar": ("write", ([SPEED, SETPOINT], 5), {}, "TagError", ("list of 2 paths", "list of values")),
    "count-mismatch": ("write", ([SPEED, SETPOINT], [5]), {}, "TagError", ("2 paths but 1 values",)),
    "same-tag-twice": ("write", ([SPEED, SPEED], [5, 6]), {}, "TagError", (SPEED, "twice")),
    "one-bad-in-batch": ("write", ([SETPOINT, SPEED], [50, True]), {}, "TagTypeError", (SPEED, "is a boolean")),
    "confirm-timeout-text": ("write_confirm", (SPEED, 5), {"timeout_ms": "abc"}, "InvalidArgument",
                             ("tags.write_confirm", "timeout_ms", "'abc'")),
    "confirm-timeout-nan": ("write_confirm", (SPEED, 5), {"timeout_ms": math.nan}, "InvalidArgument",
                            ("timeout_ms", "finite")),
    "confirm-timeout-negative": ("write_confirm", (SPEED, 5), {"timeout_ms": -1}, "InvalidArgument",
                                 ("timeout_ms", ">= 0", "-1")),
    "confirm-timeout-bool": ("write_confirm", (SPEED, 5), {"timeout_ms": True}, "InvalidArgument",
                             ("timeout_ms", "True")),
    "confirm-poll-zero": ("write_confirm", (SPEED, 5), {"poll_ms": 0}, "InvalidArgument", ("poll_ms", ">= 1")),
    "confirm-poll-inf": ("write_confirm", (SPEED, 5), {"poll_ms": math.inf}, "InvalidArgument", ("poll_ms", "inf")),
    "confirm-tolerance-negative": ("write_confirm", (SETPOINT, 5), {"tolerance": -0.1}, "InvalidArgument",
                                   ("tolerance", "-0.1")),
    "confirm-tolerance-text": ("write_confirm", (SETPOINT, 5), {"tolerance": "x"}, "InvalidArgument",
                               ("tolerance", "'x'")),
    "confirm-path-unknown": ("write_confirm", (SPEED, 5), {"confirm_path": "[plant]Nope"}, "UnknownTag",
                             ("[plant]Nope",)),
    "confirm-path-int": ("write_confirm", (SPEED, 5), {"confirm_path": 5}, "TagPathError", ("5",)),
    "confirm-path-none": ("write_confirm", (None, 5), {}, "InvalidArgument", ("tags.write_confirm", "path")),
    "confirm-bool-to-int": ("write_confirm", (SPEED, True), {}, "TagTypeError", (SPEED, "is a boolean")),
    "confirm-above-max": ("write_confirm", (SETPOINT, 101), {}, "TagRangeError", (SETPOINT, "above the tag's max 100")),
    "read-path-none": ("read", (None,), {}, "InvalidArgument", ("tags.read", "path", "None")),
    "read-path-int": ("read", (5,), {}, "InvalidArgument", ("tags.read", "got 5")),
    "read-path-in-list": ("read", ([SPEED, 5],), {}, "TagPathError", ("5",)),
    "read-unknown": ("read", ("[plant]Tank/Levl",), {}, "UnknownTag", ("[plant]Tank/Levl", "did you mean")),
}


@workflow(name="badinput.tag_call")
def tag_call(case: str) -> Any:
    step, args, kwargs, _, _ = CASES[case]
    return getattr(tags, step)(*args, **kwargs)


@pytest.fixture(scope="module")
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer(POINTS)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine(plc: ModbusSimServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StepEngine]:
    path: Path = tmp_path_factory.mktemp("badinput-tags")
    engine = StepEngine(path, {"devices": {"plc": modbus_settings(plc.port)}, "tags": TAGS})
    yield engine
    engine.close()


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_tag_call_is_refused_before_anything_is_sent(
    case: str, engine: StepEngine, plc: ModbusSimServer
) -> None:
    _, _, _, error, fragments = CASES[case]
    values = {address: plc.get(address) for address in ("C1", "HRF1", "HRF3", "HR5", "IR1")}
    writes = plc.write_count()
    view = engine.run("badinput.tag_call", {"case": case})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == error, view["error"]
    for fragment in fragments:
        assert fragment in view["error"]["message"], (fragment, view["error"]["message"])
    assert view["steps"][0]["attempts"] == 1  # a failed check is never retried
    assert plc.write_count() == writes  # nothing reached the device
    assert {address: plc.get(address) for address in values} == values
    assert not [e for e in view["events"] if e["kind"].startswith("tag_write")]
