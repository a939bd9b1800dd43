"""Fail the test session, instead of hanging it, when a non-daemon thread outlives every fixture.

Python waits for every non-daemon thread before the interpreter exits. One left running by a test (an
``asyncua.sync`` client never disconnected starts one, so does a ``ThreadPoolExecutor`` never shut down)
makes ``pytest`` print its green summary and then never exit: CI sees a timeout, not a failure, and
nothing names the culprit. At the end of the session (all fixtures torn down) this gives such threads
a few seconds to end, then prints each survivor with its stack and ends the process with a failure.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback

import pytest

# seconds a thread that is ending gets to end (the guard's own test sets it short)
GRACE_SECONDS = float(os.environ.get("EXCHANGE_TEST_THREAD_GRACE_SECONDS", "10"))

_leaked: list[threading.Thread] = []


def lingering_threads(grace_seconds: float) -> list[threading.Thread]:
    """The non-daemon threads besides the main one still alive after ``grace_seconds``."""
    deadline = time.monotonic() + grace_seconds
    while True:
        alive = [t for t in threading.enumerate()
                 if t is not threading.main_thread() and not t.daemon and t.is_alive()]
        if not alive or time.monotonic() >= deadline:
            return alive
        alive[0].join(timeout=min(0.2, max(0.0, deadline - time.monotonic())))


def describe(threads: list[threading.Thread]) -> str:
    frames = sys._current_frames()
    lines = [f"{len(threads)} non-daemon thread(s) still running after the whole session; python would "
             "wait for them forever:"]
    for thread in threads:
        lines.append(f"--- thread {thread.name!r} (ident {thread.ident})")
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            lines.extend(line.rstrip() for line in traceback.format_stack(frame))
    return "\n".join(lines)


@pytest.hookimpl(trylast=True)  # after the runner's own sessionfinish has torn down session fixtures
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _leaked[:] = lingering_threads(GRACE_SECONDS)
    if _leaked:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _leaked:
        terminalreporter.section("threads left running", sep="=", red=True)
        terminalreporter.write_line(describe(_leaked))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _leaked:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(pytest.ExitCode.TESTS_FAILED))  # joining them would hang until CI's timeout
