"""Retry attempts, backoff deadlines and durable sleeps survive a kill -9 of the gateway.

The steps write wall-clock timestamps to a file (fsync'd), so the gaps measured here are what the
engine really waited. A gateway killed during a retry backoff must resume with the next attempt
number, not 1, and wait only the rest of the backoff; killed during ``sleep_chunked`` it must sleep
only the rest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines, wait_until

BACKOFF_S = 3.5
SLEEP_S = 3.5
KILL_AFTER_S = 1.0  # into the backoff / sleep; the restart has 2.5 s to be ready before it ends
# Allowed lateness of a resumed attempt / wake-up (thread wake-ups on a loaded CI box). Waiting a
# whole backoff after the restart would be at least KILL_AFTER_S + start-up (> 0.3 s) late.
LATE_S = 0.5

APP = f"""
import os
import time

from exchange.workflows.bootstrap import RetryableError, step, workflow
from exchange._engine.execution.context import current_run
from exchange.workflows.steps.sleep import sleep_chunked
from testapps.sidefx import append_line


@step(name="cr.flaky", options={{"retries_allowed": True, "max_attempts": 4, "interval_seconds": {BACKOFF_S},
                                "backoff_rate": 1.0}})
def flaky(path):
    attempt = current_run().step.attempt
    append_line(path, "flaky %s %r %s" % (attempt, time.time(), os.getpid()))
    if attempt == 1:
        raise RetryableError("first attempt fails")
    if attempt == 2:
        raise RetryableError("second attempt fails, retry soon", retry_after=0.05)
    return attempt


@workflow(name="cr.retry")
def retry_wf(path):
    return {{"attempt": flaky(path)}}


@step(name="cr.mark")
def mark(path, tag):
    append_line(path, "%s 0 %r %s" % (tag, time.time(), os.getpid()))
    return tag


@workflow(name="cr.sleep")
def sleep_wf(path, total_ms):
    mark(path, "before")
    sleep_chunked(total_ms=total_ms, chunk_ms=100)
    mark(path, "after")
    return "slept"


@step(name="cr.slow_retry", options={{"retries_allowed": True, "max_attempts": 5, "interval_seconds": 60}})
def slow_retry(path):
    append_line(path, "slow %s %r %s" % (current_run().step.attempt, time.time(), os.getpid()))
    raise RetryableError("always fails")


@workflow(name="cr.cancel_in_backoff")
def cancel_in_backoff(path):
    slow_retry(path)
"""


def make_env(root: Path, zygote: ForkServer) -> ExchangeEnv:
    env = ExchangeEnv.create(root, zygote=zygote)  # gateways and commands forked (see tests/harness.py)
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("crash_retry", APP)
    return env


def lines_of(path: Path) -> list[tuple[str, int, float, int]]:
    return [(tag, int(n), float(ts), int(pid)) for tag, n, ts, pid in read_lines(path)]


def test_attempts_and_backoff_survive_kill9(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = make_env(tmp_path, exchange_zygote)
    side = tmp_path / "attempts.txt"
    runtime = env.runtime()
    try:
        with env.gateway() as gateway:
            gateway.start()
            (run_id,) = env.start_runs("cr.retry", [{"path": str(side)}])

            def retrying() -> Any:
                steps = runtime.store.steps.load(run_id)
                return steps.get(1) if steps.get(1) is not None and steps[1].status == "RETRYING" else None

            row = wait_until(retrying, 20, message="attempt 1 to fail and its retry to be recorded")
            assert row.attempts == 1
            ((_, attempt, t1, first_pid),) = lines_of(side)
            assert attempt == 1 and abs(row.next_attempt_at - (t1 + BACKOFF_S)) < 0.3
            wait_until(lambda: time.time() >= t1 + KILL_AFTER_S, 10, message="the kill point in the backoff")
            gateway.kill9()
            gateway.start()
            assert gateway.ready_at < t1 + BACKOFF_S, "the gateway restarted too slowly to measure the rest"

            done = runtime.wait_for(run_id, 20)
            assert done["status"] == "SUCCESS", done
            assert done["result"] == {"attempt": 3}
            found = lines_of(side)
            assert [n for _, n, _, _ in found] == [1, 2, 3], found  # no attempt number restarted at 1
            _, _, t2, second_pid = found[1]
            assert second_pid == gateway.pid != first_pid
            print(f"\nattempt 2 at +{t2 - t1:.3f}s (backoff {BACKOFF_S}s, restart at +{gateway.spawned_at - t1:.3f}s)")
            # Attempt 2 came when the recorded backoff ended, not a whole backoff after the restart.
            assert t1 + BACKOFF_S - 0.02 <= t2 <= t1 + BACKOFF_S + LATE_S, (
                f"attempt 2 came {t2 - t1:.3f}s after attempt 1; backoff {BACKOFF_S}s, restart at "
                f"{gateway.spawned_at - t1:.3f}s")
            shown = env.show(run_id)
            (step,) = shown["steps"]
            assert step["status"] == "SUCCESS" and step["attempts"] == 3
            retries = [e["payload"]["attempt"] for e in shown["events"] if e["kind"] == "retry"]
            assert retries == [1, 2]
            assert gateway.stop() == 0
    finally:
        runtime.close()


def test_sleep_chunked_sleeps_only_the_rest_after_kill9(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = make_env(tmp_path, exchange_zygote)
    side = tmp_path / "marks.txt"
    runtime = env.runtime()
    try:
        with env.gateway() as gateway:
            gateway.start()
            (run_id,) = env.start_runs("cr.sleep", [{"path": str(side), "total_ms": int(SLEEP_S * 1000)}])
            wake_at = wait_until(lambda: runtime.store.runs.get(run_id).quiet_wake_at, 20,
                                 message="the sleep to record its wake-up time")
            ((tag, _, t_before, _),) = lines_of(side)
            assert tag == "before" and abs(wake_at - (t_before + SLEEP_S)) < 0.3
            wait_until(lambda: time.time() >= t_before + KILL_AFTER_S, 10, message="the kill point in the sleep")
            gateway.kill9()
            gateway.start()
            assert gateway.ready_at < wake_at, "the gateway restarted too slowly to measure the rest"

            done = runtime.wait_for(run_id, 20)
            assert done["status"] == "SUCCESS" and done["result"] == "slept", done
            found = lines_of(side)
            assert [t for t, _, _, _ in found] == ["before", "after"], found  # "before" ran once
            t_after = found[1][2]
            print(f"\nwoke {t_after - wake_at:+.3f}s from the recorded wake-up (restart at "
                  f"+{gateway.spawned_at - t_before:.3f}s of {SLEEP_S}s)")
            assert wake_at - 0.02 <= t_after <= wake_at + LATE_S, (
                f"woke {t_after - wake_at:+.3f}s from the recorded wake-up; restart was at "
                f"{gateway.spawned_at - t_before:.3f}s into a {SLEEP_S}s sleep")
            assert gateway.stop() == 0
    finally:
        runtime.close()


def test_cancel_from_another_process_during_backoff(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = make_env(tmp_path, exchange_zygote)
    side = tmp_path / "slow.txt"
    runtime = env.runtime()
    try:
        with env.gateway() as gateway:
            gateway.start()
            (run_id,) = env.start_runs("cr.cancel_in_backoff", [{"path": str(side)}])
            wait_until(lambda: (s := runtime.store.steps.load(run_id).get(1)) is not None and s.status == "RETRYING",
                       20, message="the first attempt to fail")
            sent_at = time.monotonic()
            result = env.cli("cancel", run_id, "--reason", "operator gave up").check()
            assert run_id in result.stdout
            done = runtime.wait_for(run_id, 10)
            assert done["status"] == "CANCELLED", done
            assert time.monotonic() - sent_at < 5  # not the 60 s backoff
            assert done["error"] == {"type": "Cancelled", "message": "operator gave up"}
            assert [n for _, n, _, _ in lines_of(side)] == [1]
            assert gateway.stop() == 0
    finally:
        runtime.close()
