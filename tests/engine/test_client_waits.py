"""A client waiting on a run outside any workflow (``waitFor``, ``getEvent``) reads the store a few
times a second, not every ``mailbox_poll_ms``.

Such a waiter often lives in a gateway's own process (a script, the tests), where every read is a
turn of the GIL that the gateway's committer waits behind. With a read every 10 ms, the delivery
sweep's one waiting test thread took half the process's CPU and the runs' commits waited seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator import runtime as runtime_module
from exchange._engine.operator.runtime import Runtime
from exchange.workflows.bootstrap import workflow
from tests.engine.conftest import make_runtime

WAIT_SECONDS = 1.5
# The pauses start at mailbox_poll_ms (10 ms) and double up to CLIENT_POLL_MAX_SECONDS (0.25 s):
# about 11 reads in 1.5 s. A read every 10 ms would make 150.
MOST_READS = 16


@workflow(name="client_waits.never_runs")
def never_runs() -> None:  # pragma: no cover - no gateway serves its queue
    return None


@workflow(name="client_waits.quick")
def quick(i: int) -> int:
    return i


@workflow(name="client_waits.slow")
def slow(seconds: float) -> None:
    time.sleep(seconds)


@pytest.fixture
def client(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """A runtime that executes nothing (a client), and a run nobody executes."""
    runtime = make_runtime(sqlite_url, tmp_path)
    try:
        yield runtime, runtime.start("client_waits.never_runs", {}, queue="nobody-serves-this")
    finally:
        runtime.close()


def test_waiting_for_a_run_executing_elsewhere_reads_the_store_a_few_times_a_second(
    client: tuple[Runtime, str], mocker: Any
) -> None:
    runtime, run_id = client
    reads = mocker.spy(runtime.store.runs, "get")
    started = time.monotonic()
    view = runtime.wait_for(run_id, WAIT_SECONDS)
    assert time.monotonic() - started >= WAIT_SECONDS
    assert view["status"] == "ENQUEUED"
    assert 2 <= reads.call_count <= MOST_READS, reads.call_count


def test_waiting_for_another_runs_value_reads_the_store_a_few_times_a_second(
    client: tuple[Runtime, str], mocker: Any
) -> None:
    runtime, run_id = client
    reads = mocker.spy(runtime.store.values, "get")
    assert runtime.get_event(run_id, "never-set", WAIT_SECONDS) is None
    assert 2 <= reads.call_count <= MOST_READS, reads.call_count


def test_a_client_waiting_on_one_run_is_not_woken_by_the_ends_of_other_runs(
    client: tuple[Runtime, str], mocker: Any
) -> None:
    """Each run that ended in the process used to wake every client waiting on any run, and each then
    read its own run: with a waiter per run, every end cost a read per waiter."""
    runtime, waited = client
    dispatcher = Dispatcher(runtime, queues=["default"])  # not the waited run's queue
    dispatcher.start()
    try:
        reads = mocker.spy(runtime.store.runs, "get")
        views: list[Any] = []
        waiter = threading.Thread(target=lambda: views.append(runtime.wait_for(waited, 3.0)))
        waiter.start()
        for i in range(20):  # executed and ended here, one after another, while the waiter waits
            assert runtime.wait_for(runtime.start("client_waits.quick", {"i": i}), 30)["status"] == "SUCCESS"
        assert waiter.is_alive(), "the other runs did not all end within the wait"
        waiter.join(30)
    finally:
        dispatcher.stop()
    assert views and views[0]["status"] == "ENQUEUED"
    reads_of_waited = sum(1 for call in reads.call_args_list if call.args == (waited,))
    # About 17 reads in 3 s (see MOST_READS); 20 more if each end woke the waiter.
    assert 2 <= reads_of_waited <= 24, reads_of_waited


def test_a_client_waiting_on_a_run_executing_here_sees_its_end_at_once(
    client: tuple[Runtime, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's end used to wake its waiters before its final status was committed: they read it
    still RUNNING, then slept through their next pause (up to CLIENT_POLL_MAX_SECONDS). The pauses
    may grow to 2 s here, so that such a missed wake-up costs most of a second (the reads come at
    1.27 s and then 2.55 s of waiting), far above what a loaded machine adds to a wake-up on time."""
    monkeypatch.setattr(runtime_module, "CLIENT_POLL_MAX_SECONDS", 2.0)
    runtime, _ = client
    dispatcher = Dispatcher(runtime, queues=["default"])
    dispatcher.start()
    try:
        run_id = runtime.start("client_waits.slow", {"seconds": 1.5})  # ends between the reads at 1.27 s and 2.55 s
        view = runtime.wait_for(run_id, 30)
        returned_at = runtime.store.clock.now()
        ended = runtime.store.runs.get(run_id)
    finally:
        dispatcher.stop()
    assert view["status"] == "SUCCESS"
    assert ended is not None and ended.finished_at is not None
    # Timed from the commit of the run's end (the store's clock, as finished_at), not from the
    # start: how long the dispatcher took to begin the run is no part of it.
    late = returned_at - ended.finished_at
    assert late < 0.5, f"wait_for returned {late:.3f} s after the run's end"
