"""Step retries with DBOS semantics: attempts, backoff gaps, fatal errors, durable attempt counts."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest

from exchange._engine.execution.retry import RetryPolicy
from exchange.errors import FatalError, RetryableError, WorkflowError
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from tests.engine.conftest import Engine
from tests.waiting import wait_until

ATTEMPT_TIMES: dict[str, list[float]] = defaultdict(list)


@step(name="retries.flaky", options={"retries_allowed": True, "max_attempts": 4, "interval_seconds": 0.1,
                                     "backoff_rate": 2.0})
def flaky(key: str, fail_times: int) -> int:
    ATTEMPT_TIMES[key].append(time.monotonic())
    if len(ATTEMPT_TIMES[key]) <= fail_times:
        raise ConnectionError(f"flaky attempt {len(ATTEMPT_TIMES[key])}")
    return len(ATTEMPT_TIMES[key])


@step(name="retries.fatal", options={"retries_allowed": True, "max_attempts": 5, "interval_seconds": 0.01})
def fatal(key: str) -> None:
    ATTEMPT_TIMES[key].append(time.monotonic())
    raise FatalError("bad recipe")


@step(name="retries.no_retries")
def no_retries(key: str) -> None:
    ATTEMPT_TIMES[key].append(time.monotonic())
    raise RetryableError("busy")


@step(name="retries.retry_after", options={"retries_allowed": True, "max_attempts": 2, "interval_seconds": 30})
def retry_after(key: str) -> str:
    ATTEMPT_TIMES[key].append(time.monotonic())
    if len(ATTEMPT_TIMES[key]) == 1:
        raise RetryableError("rate limited", retry_after=0.05)
    return "ok"


@step(name="retries.slow_backoff", options={"retries_allowed": True, "max_attempts": 3, "interval_seconds": 1.5,
                                            "backoff_rate": 1.0})
def slow_backoff(key: str) -> int:
    ATTEMPT_TIMES[key].append(time.time())
    if len(ATTEMPT_TIMES[key]) < 2:
        raise ConnectionError("down")
    return len(ATTEMPT_TIMES[key])


@step(name="retries.once_more", options={"retries_allowed": True, "max_attempts": 2, "interval_seconds": 0.5})
def once_more(key: str) -> int:
    ATTEMPT_TIMES[key].append(time.monotonic())
    if len(ATTEMPT_TIMES[key]) == 1:
        raise ConnectionError("down")
    return len(ATTEMPT_TIMES[key])


@workflow(name="retries.run_once_more")
def run_once_more(key: str) -> int:
    return once_more(key)


@workflow(name="retries.run_flaky")
def run_flaky(key: str, fail_times: int) -> int:
    return flaky(key, fail_times)


@workflow(name="retries.run_fatal")
def run_fatal(key: str) -> None:
    fatal(key)


@workflow(name="retries.run_no_retries")
def run_no_retries(key: str) -> None:
    no_retries(key)


@workflow(name="retries.run_retry_after")
def run_retry_after(key: str) -> str:
    return retry_after(key)


@workflow(name="retries.run_slow_backoff")
def run_slow_backoff(key: str) -> int:
    return slow_backoff(key)


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def test_a_flaky_step_is_retried_with_growing_gaps(engine: Engine) -> None:
    key = f"flaky-{engine.store_url[:6]}"
    ATTEMPT_TIMES[key].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_flaky", {"key": key, "fail_times": 2}), 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 3
    assert view["steps"][0]["attempts"] == 3
    retries = [e for e in view["events"] if e["kind"] == "retry"]
    assert [e["payload"]["attempt"] for e in retries] == [1, 2]
    assert [e["payload"]["delay_seconds"] for e in retries] == [0.1, 0.2]  # the backoff as planned
    # Never earlier than planned: the backoff runs on the monotonic clock the times are taken with, from
    # after the failed attempt began; the loose upper bound catches a unit error (ms taken for s)
    # without failing when a loaded machine delays the store write between attempts.
    gap1, gap2 = _gaps(ATTEMPT_TIMES[key])
    assert 0.1 <= gap1 < 3 and 0.2 <= gap2 < 3, (gap1, gap2)
    assert "ConnectionError: flaky attempt 1" in retries[0]["payload"]["error"]


def test_max_attempts_counts_every_attempt(sqlite_engine: Engine) -> None:
    ATTEMPT_TIMES["exhaust"].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_flaky", {"key": "exhaust", "fail_times": 10}), 20)
    assert view["status"] == "ERROR"
    assert len(ATTEMPT_TIMES["exhaust"]) == 4
    assert view["steps"][0]["attempts"] == 4 and view["steps"][0]["status"] == "ERROR"
    assert view["error"]["type"] == "ConnectionError"


def test_a_fatal_error_is_not_retried(sqlite_engine: Engine) -> None:
    ATTEMPT_TIMES["fatal"].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_fatal", {"key": "fatal"}), 20)
    assert view["status"] == "ERROR"
    assert len(ATTEMPT_TIMES["fatal"]) == 1
    assert view["error"] == {"type": "FatalError", "message": "bad recipe"}


def test_without_retries_allowed_a_retryable_error_fails_once(sqlite_engine: Engine) -> None:
    ATTEMPT_TIMES["once"].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_no_retries", {"key": "once"}), 20)
    assert view["status"] == "ERROR" and len(ATTEMPT_TIMES["once"]) == 1


def test_retry_after_overrides_the_backoff(sqlite_engine: Engine) -> None:
    ATTEMPT_TIMES["after"].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_retry_after", {"key": "after"}), 20)
    assert view["status"] == "SUCCESS"
    (gap,) = _gaps(ATTEMPT_TIMES["after"])
    assert 0.04 <= gap < 5  # not the 30 s interval


def test_the_attempt_count_and_next_retry_time_survive_a_restart(engine: Engine) -> None:
    key = f"slow-{engine.store_url[:6]}"
    ATTEMPT_TIMES[key].clear()
    run_id = getWorkflows().start("retries.run_slow_backoff", {"key": key})

    def retrying() -> bool:
        steps = engine.runtime.get_run(run_id)["steps"]
        return bool(steps) and steps[0]["status"] == "RETRYING"

    wait_until(retrying, message="the step to be in backoff")
    engine.restart()
    view = getWorkflows().waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 2 and view["steps"][0]["attempts"] == 2
    # The second attempt waited out the recorded backoff, not a fresh one from the restart.
    (gap,) = _gaps(ATTEMPT_TIMES[key])
    assert 1.5 <= gap < 3.0, gap


def test_a_clock_step_while_the_retry_is_recorded_does_not_shorten_the_backoff(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backoff is measured on the monotonic clock from the failure: the wall clock stepping 5 s
    forward (or a new offset to the store's clock) while the retry row is committed changes the
    recorded next-attempt time, not the wait of the execution that is running."""
    store = sqlite_engine.runtime.store
    record = store.record_step_with_events

    def record_then_step_the_clock(*args: Any, **kwargs: Any) -> Any:
        done = record(*args, **kwargs)
        if any(event[0] == "retry" for event in kwargs.get("new_events", [])):
            monkeypatch.setattr(store.clock, "now", lambda: time.time() + 5.0)
        return done

    monkeypatch.setattr(store, "record_step_with_events", record_then_step_the_clock)
    ATTEMPT_TIMES["clock-step"].clear()
    view = getWorkflows().waitFor(getWorkflows().start("retries.run_once_more", {"key": "clock-step"}), 20)
    assert view["status"] == "SUCCESS", view["error"]
    (gap,) = _gaps(ATTEMPT_TIMES["clock-step"])
    assert gap >= 0.5, gap


def test_bad_retry_options_are_refused_naming_the_step() -> None:
    with pytest.raises(WorkflowError, match="my.step: unknown option"):
        RetryPolicy.from_options({"retries": 3}, "my.step")
    with pytest.raises(WorkflowError, match="max_attempts"):
        RetryPolicy.from_options({"max_attempts": 0}, "my.step")


@pytest.mark.parametrize(("options", "fragments"), [
    ({"retries_allowed": "no"}, ["retries_allowed", "'no'"]),  # a truthy string would turn retries on
    ({"retries_allowed": 1}, ["retries_allowed", "1"]),
    ({"max_attempts": True}, ["max_attempts", "True"]),
    ({"max_attempts": 2.5}, ["max_attempts", "2.5"]),
    ({"max_attempts": 10**12}, ["max_attempts", "1000000"]),
    ({"interval_seconds": "1"}, ["interval_seconds", "'1'"]),
    ({"interval_seconds": float("nan")}, ["interval_seconds", "nan"]),
    ({"interval_seconds": -1}, ["interval_seconds", "-1"]),
    ({"backoff_rate": float("inf")}, ["backoff_rate", "inf"]),
    ({"backoff_rate": 0.5}, ["backoff_rate", "0.5"]),
    (["retries_allowed"], ["options must be a dict"]),
    ({"retries": 3, "max_attempts": 2}, ["unknown option(s) retries", "known: retries_allowed"]),
])
def test_a_bad_step_option_is_refused_at_declaration_naming_the_step_and_key(
    options: object, fragments: list[str]
) -> None:
    with pytest.raises(WorkflowError) as info:
        step(name="bad.options.step", options=options)(lambda: None)  # type: ignore[arg-type]
    message = str(info.value)
    assert "bad.options.step" in message
    for fragment in fragments:
        assert fragment in message, message


def test_good_step_options_give_the_policy_they_say() -> None:
    policy = RetryPolicy.from_options({"retries_allowed": True, "max_attempts": 4, "interval_seconds": 2,
                                       "backoff_rate": 1}, "ok.step")
    assert policy == RetryPolicy(retries_allowed=True, max_attempts=4, interval_seconds=2.0, backoff_rate=1.0)
    assert isinstance(policy.interval_seconds, float)
    assert RetryPolicy.from_options({}, "ok.step") == RetryPolicy.from_options(None, "ok.step") == RetryPolicy()
