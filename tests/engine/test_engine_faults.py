"""Faults inside one gateway process, injected at a boundary: each test pins a way the engine used to
break its promise (a recorded step never runs again; a replay follows the path the run took)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from pytest_mock import MockerFixture

from exchange._engine.execution.context import current_run
from exchange._store.store import Store
from exchange.errors import StoreError
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps.sleep import sleep_chunked
from tests.engine.conftest import Engine
from tests.waiting import wait_until

CALLS: Counter[str] = Counter()


@step(name="faults.audited")
def audited(i: int) -> int:
    CALLS["audited"] += 1
    ctx = current_run()
    assert ctx is not None
    ctx.record_event("tag_write", {"i": i})  # the audit trail of a side effect, like tags.write
    return i * 10


@workflow(name="faults.audit")
def audit() -> int:
    return audited(1) + audited(2)


def test_a_store_outage_inside_a_step_body_is_an_outage_not_the_steps_outcome(
    engine: Engine, mocker: MockerFixture
) -> None:
    """The commit of a step's outcome with its audit event failed with a store error: the step must
    not be recorded as failed (every replay would re-raise it, the run rescheduled forever); the run is
    replayed and succeeds, with each step's event in the trail once."""
    CALLS.clear()
    original = Store.record_step_with_events
    failures = [StoreError("store: OperationalError: server closed the connection (injected)")]

    def record_step_with_events(self: Store, *args: Any, **kwargs: Any) -> None:
        if failures and kwargs.get("new_events"):
            raise failures.pop()
        original(self, *args, **kwargs)

    mocker.patch.object(Store, "record_step_with_events", autospec=True, side_effect=record_step_with_events)
    view = getWorkflows().waitFor(getWorkflows().start("faults.audit"), 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 30
    assert [(s["name"], s["status"]) for s in view["steps"]] == [("faults.audited", "SUCCESS")] * 2
    assert view["executions"] == 2  # replayed once the store answered
    assert CALLS["audited"] == 3  # the first step was in flight when the store failed: it ran again
    assert [e["payload"] for e in view["events"] if e["kind"] == "tag_write"] == [{"i": 1}, {"i": 2}]


@workflow(name="faults.quick")
def quick() -> str:
    return "done"


def test_a_transient_store_error_while_finishing_does_not_turn_success_into_error(
    engine: Engine, mocker: MockerFixture
) -> None:
    original = Store.finish_run
    failures = [StoreError("store: OperationalError: could not receive data from server (injected)")]

    def finish_run(self: Store, *args: Any, **kwargs: Any) -> bool:
        if failures:
            raise failures.pop()
        return original(self, *args, **kwargs)

    mocker.patch.object(Store, "finish_run", autospec=True, side_effect=finish_run)
    view = getWorkflows().waitFor(getWorkflows().start("faults.quick"), 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == "done" and view["executions"] == 1
    assert failures == []


@step(name="faults.sleeps_inside")
def sleeps_inside() -> None:
    sleep_chunked(total_ms=10)


@step(name="faults.receives_inside")
def receives_inside() -> None:
    getWorkflows().recvCommand(timeoutSeconds=0)


@step(name="faults.polls_inside")
def polls_inside() -> None:
    getWorkflows().recv("topic", timeoutSeconds=0)


@workflow(name="faults.in_step")
def in_step(which: str) -> None:
    {"sleep": sleeps_inside, "recvCommand": receives_inside, "recv": polls_inside}[which]()


def test_in_run_operations_inside_a_step_name_the_operation_and_the_step(sqlite_engine: Engine) -> None:
    expected = {"sleep": ("sleep_chunked", "faults.sleeps_inside"),
                "recvCommand": ("recvCommand", "faults.receives_inside"),
                "recv": ("recv", "faults.polls_inside")}
    for which, (operation, step_name) in expected.items():
        view = getWorkflows().waitFor(getWorkflows().start("faults.in_step", {"which": which}), 20)
        assert view["status"] == "ERROR"
        assert view["error"]["type"] == "OperationInStepError"
        assert f"{operation}() was called inside step {step_name!r} (sequence 1)" in view["error"]["message"]
        (recorded,) = view["steps"]  # the step's own failure, recorded once, nothing corrupted
        assert recorded["name"] == step_name and recorded["status"] == "ERROR"


@step(name="faults.raises_nul")
def raises_nul() -> None:
    CALLS["raises_nul"] += 1
    raise ValueError("device said \x00\udc80 and stopped")


@workflow(name="faults.bad_error_text")
def bad_error_text() -> None:
    raises_nul()


@workflow(name="faults.bad_progress")
def bad_progress() -> None:
    getWorkflows().progress("level \udc80 unreadable")


def test_bad_data_fails_the_call_and_is_never_an_outage(engine: Engine) -> None:
    """A NUL byte or an unencodable character used to make PostgreSQL's write fail like an outage:
    the run was replayed forever. Now an error text is stored escaped, and a value the store cannot
    hold fails the call, naming it."""
    CALLS.clear()
    view = getWorkflows().waitFor(getWorkflows().start("faults.bad_error_text"), 20)
    assert view["status"] == "ERROR" and view["executions"] == 1 and CALLS["raises_nul"] == 1
    assert view["error"]["message"] == "device said \\x00\\udc80 and stopped"
    assert view["steps"][0]["error"]["message"] == "device said \\x00\\udc80 and stopped"
    view = getWorkflows().waitFor(getWorkflows().start("faults.bad_progress"), 20)
    assert view["status"] == "ERROR" and view["executions"] == 1
    assert view["error"]["type"] == "StoreDataError"
    assert "the store refused a value in run " in view["error"]["message"]
    assert ": progress (after sequence 0): UnicodeEncodeError" in view["error"]["message"]


SLEEP_STARTED = threading.Event()


@workflow(name="faults.long_sleep")
def long_sleep(ms: int) -> float:
    SLEEP_STARTED.set()
    sleep_chunked(total_ms=ms, chunk_ms=50)
    return ms


def test_a_resumed_sleep_follows_the_store_clock_not_a_skewed_local_one(
    engine: Engine, mocker: MockerFixture
) -> None:
    """The sleep's wake-up time is the store's; a gateway whose wall clock is an hour ahead resumes
    it for the rest of its time, not zero (nor an hour more with a clock behind)."""
    SLEEP_STARTED.clear()
    run_id = getWorkflows().start("faults.long_sleep", {"ms": 1500})
    wait_until(SLEEP_STARTED.is_set, 10, message="the sleep to start")
    started = time.monotonic()
    real_time = time.time
    mocker.patch("time.time", side_effect=lambda: real_time() + 3600.0)
    engine.restart()  # suspended mid-sleep, resumed by a gateway whose clock is an hour ahead
    view = getWorkflows().waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    elapsed = time.monotonic() - started
    assert 1.2 < elapsed < 5.0, elapsed


ATTEMPTS: list[float] = []
FIRST_ATTEMPT_FAILED = threading.Event()


@step(name="faults.slow_retry", options={"retries_allowed": True, "max_attempts": 2, "interval_seconds": 1.5})
def slow_retry() -> int:
    ATTEMPTS.append(time.monotonic())
    if len(ATTEMPTS) == 1:
        FIRST_ATTEMPT_FAILED.set()
        raise RuntimeError("first attempt fails")
    return len(ATTEMPTS)


@workflow(name="faults.retry_once")
def retry_once() -> int:
    return slow_retry()


def test_a_recorded_retry_time_follows_the_store_clock_not_a_skewed_local_one(
    engine: Engine, mocker: MockerFixture
) -> None:
    ATTEMPTS.clear()
    FIRST_ATTEMPT_FAILED.clear()
    run_id = getWorkflows().start("faults.retry_once")
    wait_until(FIRST_ATTEMPT_FAILED.is_set, 10, message="the first attempt to fail")
    wait_until(lambda: getWorkflows().getRun(run_id)["steps"], 10, message="the backoff to be recorded")
    real_time = time.time
    mocker.patch("time.time", side_effect=lambda: real_time() + 3600.0)
    engine.restart()  # a gateway whose clock is an hour ahead resumes the backoff
    view = getWorkflows().waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert 1.4 <= ATTEMPTS[1] - ATTEMPTS[0] < 4.0, ATTEMPTS
