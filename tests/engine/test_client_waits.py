"""A client waiting on a run outside any workflow (``waitFor``, ``getEvent``) reads the store a few
times a second, not every ``mailbox_poll_ms``.

Such a waiter often lives in a gateway's own process (a script, the tests), where every read is a
turn of the GIL that the gateway's committer waits behind. With a read every 10 ms, the delivery
sweep's one waiting test thread took half the process's CPU and the runs' commits waited seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.runtime import Runtime
from exchange.workflows.bootstrap import workflow
from tests.engine.conftest import make_runtime

WAIT_SECONDS = 1.5
# The pauses start at mailbox_poll_ms (10 ms) and double up to CLIENT_POLL_MAX_SECONDS (0.25 s):
# about 11 reads in 1.5 s. A read every 10 ms would make 150.
MOST_READS = 16


@workflow(name="client_waits.never_runs")
def never_runs() -> None:  # pragma: no cover - no gateway serves its queue
    return None


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
