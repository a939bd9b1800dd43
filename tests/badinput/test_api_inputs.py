"""Bad arguments of the runtime API, the in-run operations, sleep and wait steps: each one is refused
with the documented error class, a message naming the parameter, and nothing stored (every table of
the store is compared before and after) or read from a device."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime
from exchange._values import DataType
from exchange.errors import (
    InvalidArgument,
    InvalidParams,
    UnknownCommand,
    UnknownRun,
    UnknownWorkflow,
    WorkflowError,
)
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows, set_runtime
from exchange.workflows.steps import wait
from exchange.workflows.steps.sleep import sleep_chunked
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.engine.conftest import make_runtime
from tests.steps.conftest import StepEngine, make_engine  # noqa: F401  (make_engine: a fixture)

MB = 1_000_000


@workflow(name="badinput.api.quick")
def quick(n: int = 1) -> int:
    return n


@workflow(name="badinput.api.anything")
def anything(n: Any = None) -> Any:  # Any: any JSON value
    return n


# ----- outside a run: every table unchanged ---------------------------------------------------------
@dataclass
class Frozen:
    """A store with one finished run and one ENQUEUED run, and no dispatcher: nothing moves in it
    unless a call writes."""

    runtime: Runtime
    db: Path
    finished: str
    waiting: str


def snapshot(db: Path) -> dict[str, list[str]]:
    """Every row of every table (the node lock's heartbeat aside), as sortable text."""
    with closing(sqlite3.connect(db)) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables if "node" not in t}


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frozen]:
    root = tmp_path_factory.mktemp("api")
    db = root / "var" / "exchange.db"
    runtime = make_runtime(f"sqlite:///{db}", root)
    dispatcher = Dispatcher(runtime)
    dispatcher.start()
    finished = runtime.start("badinput.api.quick", {"n": 2})
    assert runtime.wait_for(finished, 20)["status"] == "SUCCESS"
    dispatcher.stop()
    waiting = runtime.start("badinput.api.quick")  # no dispatcher claims it: it stays ENQUEUED
    yield Frozen(runtime, db, finished, waiting)
    runtime.close()


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


Call = Callable[[Frozen], Any]
NAN, INF = math.nan, math.inf

API_CASES: list[Any] = [
    # start: InvalidParams (or UnknownWorkflow) naming the parameter or option
    pytest.param(lambda f: f.runtime.start(42), InvalidParams, ["start", "name", "42"], id="start-name-int"),
    pytest.param(lambda f: f.runtime.start("w" * 100_000), InvalidParams, ["name", "100000 characters"],
                 id="start-name-huge"),
    pytest.param(lambda f: f.runtime.start("no.such.flow"), UnknownWorkflow, ["'no.such.flow'"],
                 id="start-unknown-workflow"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", [("n", 1)]), InvalidParams,
                 ["params must be a dict"], id="start-params-list"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": NAN}), InvalidParams,
                 ["parameter 'n'", "nan"], id="start-param-nan"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": INF}), InvalidParams,
                 ["parameter 'n'", "inf"], id="start-param-inf"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": "x" * (20 * MB)}), InvalidParams,
                 ["params_max_bytes", "largest is 'n'"], id="start-param-20MB"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": deep(150)}), InvalidParams,
                 ["parameter 'n'", "deeper than"], id="start-param-too-deep"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": "ab\udcff"}), InvalidParams,
                 ["parameter 'n'", "undecodable"], id="start-param-surrogate"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"\udcff": 1}), InvalidParams,
                 ["parameter name", "undecodable"], id="start-param-name-surrogate"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": {"at": object()}}), InvalidParams,
                 ["parameter 'n'['at']", "not JSON"], id="start-param-object"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", {"n": 1}, timeoutSeconds=NAN), InvalidParams,
                 ["timeoutSeconds", "nan"], id="start-timeout-nan"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", timeoutSeconds=0), InvalidParams,
                 ["timeoutSeconds"], id="start-timeout-zero"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", timeoutSeconds=True), InvalidParams,
                 ["timeoutSeconds", "True"], id="start-timeout-bool"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", priority=2**40), InvalidParams,
                 ["priority"], id="start-priority-64bit"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", priority="high"), InvalidParams,
                 ["priority", "'high'"], id="start-priority-str"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", partitionKey=["a"]), InvalidParams,
                 ["partitionKey"], id="start-partition-list"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", queue="q" * 101), InvalidParams,
                 ["queue", "101 characters"], id="start-queue-long"),
    pytest.param(lambda f: f.runtime.start("badinput.api.quick", actor="a\x00b"), InvalidParams,
                 ["actor", "NUL"], id="start-actor-nul"),
    # wait_for / get_run: InvalidArgument naming the parameter, UnknownRun naming the id
    pytest.param(lambda f: f.runtime.wait_for(f.waiting, NAN), InvalidArgument, ["wait_for", "timeout_seconds", "nan"],
                 id="waitFor-nan"),
    pytest.param(lambda f: f.runtime.wait_for(f.waiting, -1), InvalidArgument, ["timeout_seconds", "-1"],
                 id="waitFor-negative"),
    pytest.param(lambda f: f.runtime.wait_for(f.waiting, INF), InvalidArgument, ["timeout_seconds", "inf"],
                 id="waitFor-inf"),
    pytest.param(lambda f: f.runtime.wait_for(f.waiting, True), InvalidArgument, ["timeout_seconds", "True"],
                 id="waitFor-bool"),
    pytest.param(lambda f: f.runtime.wait_for(f.waiting, "1"), InvalidArgument, ["timeout_seconds", "'1'"],
                 id="waitFor-str"),
    pytest.param(lambda f: f.runtime.wait_for(None, 1), InvalidArgument, ["wait_for", "run_id"], id="waitFor-id-none"),
    pytest.param(lambda f: f.runtime.get_run(123), InvalidArgument, ["get_run", "run_id", "123"], id="getRun-id-int"),
    pytest.param(lambda f: f.runtime.get_run("x" * MB), InvalidArgument, ["run_id", "1000000 characters"],
                 id="getRun-id-huge"),
    pytest.param(lambda f: f.runtime.get_run("ab\udcffcd"), InvalidArgument, ["run_id", "undecodable"],
                 id="getRun-id-surrogate"),
    pytest.param(lambda f: f.runtime.get_run("c5191ce7"), UnknownRun, ["'c5191ce7'"], id="getRun-short-id"),
    # send_command
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "HOLD", "r" * 1001), InvalidArgument,
                 ["send_command", "reason", "1001 characters", "1000"], id="sendCommand-reason-long"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "HOLD", 5), InvalidArgument,
                 ["reason", "5"], id="sendCommand-reason-int"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "HOLD", "\udcff"), InvalidArgument,
                 ["reason", "undecodable"], id="sendCommand-reason-surrogate"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "LAUNCH"), UnknownCommand, ["'LAUNCH'", "HOLD"],
                 id="sendCommand-unknown"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, None), UnknownCommand, ["None"], id="sendCommand-none"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "H" * MB), UnknownCommand, ["unknown command"],
                 id="sendCommand-huge"),
    pytest.param(lambda f: f.runtime.send_command(42, "HOLD"), InvalidArgument, ["send_command", "run_id"],
                 id="sendCommand-id-int"),
    pytest.param(lambda f: f.runtime.send_command(f.waiting, "HOLD", args={"x": NAN}), InvalidArgument,
                 ["args['x']", "nan"], id="sendCommand-args-nan"),
    pytest.param(lambda f: f.runtime.send_command(f.finished, "HOLD"), WorkflowError,
                 ["is SUCCESS: already finished, nothing sent"], id="sendCommand-finished"),
    # send
    pytest.param(lambda f: f.runtime.send(f.waiting, "recipe", {"blob": "x" * 64_001}), InvalidArgument,
                 ["send", "message", "message_max_bytes"], id="send-too-large"),
    pytest.param(lambda f: f.runtime.send(f.waiting, "recipe", {1, 2}), InvalidArgument,
                 ["send", "message", "not JSON"], id="send-not-json"),
    pytest.param(lambda f: f.runtime.send(f.waiting, "", 1), InvalidArgument, ["send", "topic"], id="send-topic-empty"),
    pytest.param(lambda f: f.runtime.send(f.finished, "recipe", 1), WorkflowError, ["is SUCCESS: already finished"],
                 id="send-finished"),
    # cancel: a finished run is not reported as cancelled
    pytest.param(lambda f: f.runtime.cancel(f.finished, "late"), WorkflowError,
                 ["already finished (SUCCESS); nothing cancelled"], id="cancel-finished"),
    pytest.param(lambda f: f.runtime.cancel(f.waiting, "r" * 5000), InvalidArgument, ["cancel", "reason", "5000"],
                 id="cancel-reason-long"),
    pytest.param(lambda f: f.runtime.cancel(None), InvalidArgument, ["cancel", "run_id"], id="cancel-id-none"),
    # get_event / list_runs
    pytest.param(lambda f: f.runtime.get_event(f.waiting, "k", NAN), InvalidArgument, ["get_event", "timeout_seconds"],
                 id="getEvent-nan"),
    pytest.param(lambda f: f.runtime.get_event(f.waiting, "k", -1), InvalidArgument, ["timeout_seconds", "-1"],
                 id="getEvent-negative"),
    pytest.param(lambda f: f.runtime.get_event(f.waiting, None), InvalidArgument, ["get_event", "key"],
                 id="getEvent-key-none"),
    pytest.param(lambda f: f.runtime.list_runs(limit=-1), InvalidArgument, ["list_runs", "limit", "-1"],
                 id="listRuns-limit-negative"),
    pytest.param(lambda f: f.runtime.list_runs(limit="5"), InvalidArgument, ["limit", "'5'"], id="listRuns-limit-str"),
    pytest.param(lambda f: f.runtime.list_runs(status=3), InvalidArgument, ["list_runs", "status"],
                 id="listRuns-status-int"),
    pytest.param(lambda f: f.runtime.list_runs(workflow="\udcff"), InvalidArgument, ["workflow", "undecodable"],
                 id="listRuns-workflow-surrogate"),
]


@pytest.mark.parametrize(("call", "error", "fragments"), API_CASES)
def test_bad_api_input_is_refused_naming_it_and_nothing_is_stored(
    frozen: Frozen, call: Call, error: type[Exception], fragments: list[str]
) -> None:
    before = snapshot(frozen.db)
    with pytest.raises(error) as info:
        call(frozen)
    assert type(info.value) is error
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    if error is not UnknownWorkflow:  # that one lists every registered workflow
        assert len(message) < 600, message  # a 20 MB value is never echoed back
    assert snapshot(frozen.db) == before


FACADE_CASES: list[Any] = [
    pytest.param(lambda f: getWorkflows().waitFor(f.waiting, NAN), ["waitFor", "timeoutSeconds"], id="waitFor-nan"),
    pytest.param(lambda f: getWorkflows().waitFor(None), ["waitFor", "run_id"], id="waitFor-id-none"),
    pytest.param(lambda f: getWorkflows().getRun(123), ["getRun", "run_id"], id="getRun-id-int"),
    pytest.param(lambda f: getWorkflows().getEvent(f.waiting, "k", -1), ["getEvent", "timeoutSeconds"],
                 id="getEvent-negative"),
    pytest.param(lambda f: getWorkflows().listRuns(limit=-1), ["listRuns", "limit"], id="listRuns-limit"),
    pytest.param(lambda f: getWorkflows().listRuns(since="10m"), ["listRuns", "since"], id="listRuns-since"),
    pytest.param(lambda f: getWorkflows().sendCommand(f.waiting, "HOLD", topic=""), ["sendCommand", "topic"],
                 id="sendCommand-topic-empty"),
]


@pytest.mark.parametrize(("call", "fragments"), FACADE_CASES)
def test_the_facade_outside_a_run_names_its_own_call_and_parameter(
    frozen: Frozen, call: Call, fragments: list[str]
) -> None:
    """The runtime speaks snake_case (``wait_for``, ``timeout_seconds``); what the seed's facade
    refuses names the camelCase call and parameter the author wrote, and stores nothing."""
    before = snapshot(frozen.db)
    previous = set_runtime(frozen.runtime)
    try:
        with pytest.raises(InvalidArgument) as info:
            call(frozen)
    finally:
        set_runtime(previous)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert snapshot(frozen.db) == before


def test_cancel_of_a_finished_run_changes_nothing_and_an_enqueued_one_is_cancelled(frozen: Frozen) -> None:
    before = frozen.runtime.get_run(frozen.finished)
    with pytest.raises(WorkflowError, match=f"run {frozen.finished} already finished"):
        frozen.runtime.cancel(frozen.finished)
    assert frozen.runtime.get_run(frozen.finished) == before  # no cancel event, no flag
    other = frozen.runtime.start("badinput.api.quick")
    assert frozen.runtime.cancel(other, "not needed") == "CANCELLED"
    with pytest.raises(WorkflowError, match=r"already finished \(CANCELLED\); nothing cancelled"):
        frozen.runtime.cancel(other)


def test_an_integer_beyond_64_bits_is_kept_exactly(frozen: Frozen) -> None:
    """The store keeps parameters as JSON text: a big integer for an unannotated parameter is neither
    refused nor rounded (one annotated ``int`` holds 64 bits: tests/paramcases.py)."""
    big = 99_999_999_999_999_999_999_999_999
    run_id = frozen.runtime.start("badinput.api.anything", {"n": big})
    assert frozen.runtime.get_run(run_id)["params"] == {"n": big}
    frozen.runtime.cancel(run_id)
    before = snapshot(frozen.db)
    with pytest.raises(InvalidParams, match="parameter 'n' expects int, a 64-bit integer"):
        frozen.runtime.start("badinput.api.quick", {"n": big})
    assert snapshot(frozen.db) == before


# ----- inside a run: the run fails at the call, before anything is received or written -------------
INRUN: dict[str, Callable[[], Any]] = {
    "recvCommand-timeout-nan": lambda: getWorkflows().recvCommand(timeoutSeconds=NAN),
    "recvCommand-timeout-negative": lambda: getWorkflows().recvCommand(timeoutSeconds=-1),
    "recvCommand-timeout-str": lambda: getWorkflows().recvCommand(timeoutSeconds="a"),
    "recvCommand-timeout-inf": lambda: getWorkflows().recvCommand(timeoutSeconds=INF),
    "recvCommand-maxMessages-zero": lambda: getWorkflows().recvCommand(maxMessages=0),
    "recvCommand-state-int": lambda: getWorkflows().recvCommand(currentState=5),
    "recv-timeout-nan": lambda: getWorkflows().recv("cmd", timeoutSeconds=NAN),
    "recv-topic-none": lambda: getWorkflows().recv(None),
    "progress-message-int": lambda: getWorkflows().progress(42),
    "progress-extra-huge": lambda: getWorkflows().progress("x", {"blob": "x" * 70_000}),
    "progress-extra-set": lambda: getWorkflows().progress("x", {1, 2}),
    "setState-none": lambda: getWorkflows().setState(None),
    "setState-long": lambda: getWorkflows().setState("S" * 100),
    "setEvent-nan": lambda: getWorkflows().setEvent("k", NAN),
    "sleep-total-nan": lambda: sleep_chunked(total_ms=NAN),
    "sleep-total-negative": lambda: sleep_chunked(total_ms=-1),
    "sleep-total-inf": lambda: sleep_chunked(total_ms=INF),
    "sleep-chunk-zero": lambda: sleep_chunked(total_ms=100, chunk_ms=0),
}
INRUN_NAMED = {
    "recvCommand-timeout-nan": "recvCommand: timeoutSeconds",
    "recvCommand-timeout-negative": "recvCommand: timeoutSeconds",
    "recvCommand-timeout-str": "recvCommand: timeoutSeconds",
    "recvCommand-timeout-inf": "recvCommand: timeoutSeconds",
    "recvCommand-maxMessages-zero": "recvCommand: maxMessages",
    "recvCommand-state-int": "recvCommand: currentState",
    "recv-timeout-nan": "recv: timeoutSeconds",
    "recv-topic-none": "recv: topic",
    "progress-message-int": "progress: message",
    "progress-extra-huge": "message_max_bytes",
    "progress-extra-set": "progress: extra",
    "setState-none": "setState: state",
    "setState-long": "setState: state",
    "setEvent-nan": "value",
    "sleep-total-nan": "sleep_chunked: total_ms",
    "sleep-total-negative": "sleep_chunked: total_ms",
    "sleep-total-inf": "sleep_chunked: total_ms",
    "sleep-chunk-zero": "sleep_chunked: chunk_ms",
}


@workflow(name="badinput.api.inrun")
def inrun_case(case: str) -> str:
    INRUN[case]()
    return "not refused"


@workflow(name="badinput.api.big_result")
def big_result() -> str:
    return "x" * (MB + 10)


def _execute(runtime: Runtime, run_id: str) -> dict[str, Any]:
    dispatcher = Dispatcher(runtime)
    dispatcher.start()
    try:
        view = runtime.wait_for(run_id, 20)
    finally:
        dispatcher.stop()
    assert view["status"] in ("SUCCESS", "ERROR", "CANCELLED"), view
    return view


@pytest.mark.parametrize("case", sorted(INRUN))
def test_bad_in_run_argument_fails_the_run_before_anything_happens(sqlite_url: str, tmp_path: Path, case: str) -> None:
    runtime = make_runtime(sqlite_url, tmp_path)
    try:
        run_id = runtime.start("badinput.api.inrun", {"case": case})
        runtime.send_command(run_id, "HOLD", "waiting in the mailbox")  # must still be there afterwards
        view = _execute(runtime, run_id)
        assert view["status"] == "ERROR", view
        assert view["error"]["type"] == "InvalidArgument"
        assert INRUN_NAMED[case] in view["error"]["message"], view["error"]
        assert view["steps"] == [] and view["state"] is None and view["progress"] is None
        kinds = {e["kind"] for e in view["events"]}
        assert not kinds & {"state", "progress", "command", "command_dropped"}, kinds
        assert len(runtime.store.mailbox.pending(run_id, "cmd", 10)) == 1  # nothing received
        assert runtime.store.values.get(run_id, "k") is None
    finally:
        runtime.close()


def test_a_result_above_the_limit_fails_the_run_and_is_not_stored(sqlite_url: str, tmp_path: Path) -> None:
    runtime = make_runtime(sqlite_url, tmp_path)
    try:
        view = _execute(runtime, runtime.start("badinput.api.big_result"))
        assert view["status"] == "ERROR" and view["result"] is None
        assert view["error"]["type"] == "OutputTooLarge"
        assert "result_max_bytes" in view["error"]["message"] and "badinput.api.big_result" in view["error"]["message"]
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"total_ms": NAN}, "total_ms"),
        ({"total_ms": -5}, "total_ms"),
        ({"total_ms": "10"}, "total_ms"),
        ({"total_ms": 10, "chunk_ms": INF}, "chunk_ms"),
        ({"total_ms": 10, "chunk_ms": -1}, "chunk_ms"),
    ],
)
def test_sleep_outside_a_run_refuses_bad_durations(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidArgument, match=f"sleep_chunked: {named}"):
        sleep_chunked(**kwargs)


# ----- wait steps: checked before the first read ----------------------------------------------------
TAGS = {"[plant]Heater/Temp": {"device": "plc", "address": "HRF1", "access": "ro"}}
TEMP = "[plant]Heater/Temp"


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("HRF1", DataType.FLOAT32, 20.0)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def plant(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:  # noqa: F811
    return make_engine(devices={"plc": modbus_settings(plc.port)}, tags=TAGS)


@workflow(name="badinput.api.wait")
def wait_case(kwargs: dict[str, Any]) -> Any:
    return wait.until_tag_equals(**kwargs)


WAIT_CASES = [
    pytest.param({"path": TEMP, "expected": 20, "timeout_ms": NAN}, InvalidArgument, "timeout_ms", id="timeout-nan"),
    pytest.param({"path": TEMP, "expected": 20, "timeout_ms": -1}, InvalidArgument, "timeout_ms", id="timeout-neg"),
    pytest.param({"path": TEMP, "expected": 20, "timeout_ms": 0}, InvalidArgument, "timeout_ms", id="timeout-zero"),
    pytest.param({"path": TEMP, "expected": 20, "timeout_ms": INF}, InvalidArgument, "timeout_ms", id="timeout-inf"),
    pytest.param({"path": TEMP, "expected": 20, "timeout_ms": True}, InvalidArgument, "timeout_ms", id="timeout-bool"),
    pytest.param({"path": TEMP, "expected": 20, "poll_ms": 0}, InvalidArgument, "poll_ms", id="poll-zero"),
    pytest.param({"path": TEMP, "expected": 20, "poll_ms": NAN}, InvalidArgument, "poll_ms", id="poll-nan"),
    pytest.param({"path": TEMP, "expected": 20, "tolerance": -0.1}, InvalidArgument, "tolerance", id="tolerance-neg"),
    pytest.param({"path": TEMP, "expected": 20, "tolerance": NAN}, InvalidArgument, "tolerance", id="tolerance-nan"),
    pytest.param({"path": 42, "expected": 20}, InvalidArgument, "path", id="path-int"),
    pytest.param({"path": TEMP, "expected": NAN}, InvalidArgument, "expected", id="expected-nan"),
    pytest.param({"path": TEMP, "expected": None}, InvalidArgument, "expected", id="expected-none"),
]


@pytest.mark.parametrize(("kwargs", "error", "named"), WAIT_CASES)
def test_wait_step_arguments_are_checked_before_the_first_read(
    plant: StepEngine, plc: ModbusSimServer, kwargs: dict[str, Any], error: type[Exception], named: str
) -> None:
    plc.reset_counts()
    with pytest.raises(error) as info:
        wait.until_tag_equals(**kwargs)
    assert f"wait.until_tag_equals: {named}" in str(info.value)
    assert plc.read_count() == 0


def test_a_bad_wait_argument_in_a_run_is_one_fatal_attempt_and_no_read(
    plant: StepEngine, plc: ModbusSimServer
) -> None:
    plc.reset_counts()
    view = plant.run("badinput.api.wait", {"kwargs": {"path": TEMP, "expected": 20, "poll_ms": -250}})
    assert view["status"] == "ERROR" and view["error"]["type"] == "InvalidArgument"
    assert "poll_ms" in view["error"]["message"]
    (step,) = view["steps"]
    assert (step["name"], step["status"], step["attempts"]) == ("wait.until_tag_equals", "ERROR", 1)
    assert plc.read_count() == 0


@workflow(name="badinput.api.echo")
def echo(text: str = "") -> str:
    return text


def test_configured_size_limits_are_the_ones_enforced(sqlite_url: str, tmp_path: Path) -> None:
    """Limits set in [engine] (not only the defaults) hold, and a value within them passes."""
    runtime = make_runtime(sqlite_url, tmp_path, params_max_bytes=200, result_max_bytes=100,
                           message_max_bytes=100, reason_max_chars=10)
    try:
        with pytest.raises(InvalidParams) as caught:
            runtime.start("badinput.api.echo", {"text": "p" * 300})
        assert "params_max_bytes" in str(caught.value) and "200" in str(caught.value)
        ok = _execute(runtime, runtime.start("badinput.api.echo", {"text": "p" * 50}))
        assert ok["status"] == "SUCCESS" and ok["result"] == "p" * 50
        big = _execute(runtime, runtime.start("badinput.api.echo", {"text": "r" * 150}))
        assert big["status"] == "ERROR" and big["error"]["type"] == "OutputTooLarge"
        assert "result_max_bytes" in big["error"]["message"] and big["result"] is None
        with pytest.raises(InvalidArgument) as reason:
            runtime.send_command(ok["id"], "HOLD", reason="r" * 11)
        assert "reason is 11 characters long; the limit is 10" in str(reason.value)
        with pytest.raises(InvalidArgument) as message:
            runtime.send(ok["id"], "topic", {"m": "m" * 150})
        assert "message_max_bytes" in str(message.value)
    finally:
        runtime.close()
