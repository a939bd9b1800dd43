"""The units' lane (exchange/_engine/inrun/unit_lane.py): a run's request for units is made on a
thread of the lane, not on the run's own (which then waits, holding what the request left behind).
Calls are served by at most the lane's threads at a time, their results and errors reach their
callers, the threads end when idle and start again on the next call, and a forked child gets a lane
of its own."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from exchange._engine.inrun import unit_lane
from exchange._engine.inrun.unit_lane import THREAD_NAME, UNIT_LANE, UnitLane
from tests.waiting import wait_until


def lane_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()]


@pytest.mark.parametrize("threads", [1, 3])
def test_calls_are_made_on_the_lane_threads_at_a_time_and_answer_their_callers(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(unit_lane, "IDLE_SECONDS", 0.2)
    lane = UnitLane(threads)
    lock = threading.Lock()
    inside = 0
    most_inside = 0
    served: list[tuple[int, str]] = []

    def work(i: int) -> int:
        nonlocal inside, most_inside
        with lock:
            inside += 1
            most_inside = max(most_inside, inside)
        time.sleep(0.002)  # long enough for other callers' calls to overlap, were there no limit
        with lock:
            served.append((i, threading.current_thread().name))
            inside -= 1
        return i * 10

    results: dict[int, int] = {}
    callers = [threading.Thread(target=lambda i=i: results.__setitem__(i, lane.call(work, i))) for i in range(20)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert results == {i: i * 10 for i in range(20)}
    assert 1 <= most_inside <= threads
    assert {name for _, name in served} == {THREAD_NAME}

    class Refused(Exception):
        pass

    def refuse() -> None:
        raise Refused("no")

    with pytest.raises(Refused, match="no"):
        lane.call(refuse)
    assert lane.call(lambda a, *, b: a + b, 1, b=2) == 3  # the lane goes on after an error


def test_the_lane_thread_ends_when_idle_and_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unit_lane, "IDLE_SECONDS", 0.05)
    lane = UnitLane(1)
    first = lane.call(threading.get_ident)
    assert first != threading.get_ident()
    wait_until(lambda: not any(t.ident == first for t in lane_threads()), 5, message="the idle lane thread to end")
    assert lane.call(lambda: threading.current_thread().name) == THREAD_NAME
    assert all(t.daemon for t in lane_threads())  # nothing waits for it at exit


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_has_a_lane_of_its_own() -> None:
    """The parent's lane thread, serving when the process forks, is not in the child: the child's
    first call starts the child's own (instead of queueing for a thread that is not there)."""
    started = threading.Event()
    release = threading.Event()

    def busy() -> None:
        started.set()
        release.wait(10)

    parent_call = threading.Thread(target=UNIT_LANE.call, args=(busy,))
    parent_call.start()
    try:
        assert started.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: a call must be served within the deadline
            try:
                answer = UNIT_LANE.call(lambda: threading.current_thread().name)
                os._exit(0 if answer == THREAD_NAME else 1)
            except BaseException:
                os._exit(2)
    finally:
        release.set()
        parent_call.join(10)
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's call to the lane was never served")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
