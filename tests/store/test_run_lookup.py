"""Naming runs by a prefix of their id and listing them by filters, on both stores.

The runs are real rows of a real store (SQLite file, PostgreSQL database) created through the
store's own ``create_run``; the lookups go through the runtime API that the CLI and the Python API
use. Run ids are random UUIDs, so two that share a prefix are made by creating runs until two do.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from exchange._store.runs.runs import NewRun
from exchange.errors import AmbiguousRun, InvalidArgument, UnknownRun, WorkflowError
from exchange.workflows.engine.instance import getWorkflows, set_runtime
from tests.harness import ExchangeEnv
from tests.waiting import wait_until

MAX_RUNS_FOR_A_SHARED_PREFIX = 5000  # ~300 are enough on average; 5000 miss one with p < 1e-80


@pytest.fixture
def runtime(tmp_path: Path, store_url: str) -> Iterator[Any]:
    rt = ExchangeEnv.create(tmp_path / "env", store_url=store_url).runtime()
    yield rt
    rt.close()


def new_run(runtime: Any, workflow: str = "lookup.wf", code_version: str = "v1") -> str:
    run_id, created = runtime.store.create_run(NewRun(workflow=workflow, params_json="{}", code_version=code_version,
                                                      created_by="test"))
    assert created
    return str(run_id)


def two_runs_sharing_a_prefix(runtime: Any) -> tuple[str, str]:
    by_prefix: dict[str, str] = {}
    for _ in range(MAX_RUNS_FOR_A_SHARED_PREFIX):
        run_id = new_run(runtime)
        other = by_prefix.setdefault(run_id[:4], run_id)
        if other != run_id:
            return other, run_id
    raise AssertionError(f"no two of {MAX_RUNS_FOR_A_SHARED_PREFIX} run ids share their first 4 characters")


def test_a_unique_prefix_names_its_run_and_a_shared_one_is_refused_naming_both(runtime: Any) -> None:
    first, second = two_runs_sharing_a_prefix(runtime)
    shared = first[:4]
    with pytest.raises(AmbiguousRun) as caught:
        runtime.get_run(shared)
    assert caught.value.count == 2 and {c[0] for c in caught.value.candidates} == {first, second}
    assert first in str(caught.value) and second in str(caught.value) and "lookup.wf ENQUEUED" in str(caught.value)
    # The shortest prefixes that tell them apart, in any case, with or without the hyphen.
    common = next(i for i in range(36) if first[i] != second[i])
    for run_id in (first, second):
        assert runtime.get_run(run_id[: common + 1])["id"] == run_id
        assert runtime.get_run(run_id[:13].upper())["id"] == run_id  # "xxxxxxxx-xxxx"
        assert runtime.get_run(run_id[:9])["id"] == run_id  # ends with the hyphen
        assert runtime.get_run(run_id.upper())["id"] == run_id
    # Every call that takes a run id resolves it the same way; an ambiguous one stores nothing.
    with pytest.raises(AmbiguousRun):
        runtime.send_command(shared, "HOLD")
    with pytest.raises(AmbiguousRun):
        runtime.cancel(shared)
    assert runtime.store.mailbox.pending(first, "cmd", 10) == [] == runtime.store.mailbox.pending(second, "cmd", 10)
    assert all(v["status"] == "ENQUEUED" for v in runtime.list_runs(limit=10_000))
    message_id = runtime.send_command(first[: common + 1], "HOLD")
    assert [m.id for m in runtime.store.mailbox.pending(first, "cmd", 10)] == [message_id]
    assert runtime.cancel(second[: common + 1]) == "CANCELLED"
    assert runtime.wait_for(second[: common + 1], 0)["status"] == "CANCELLED"


def test_a_prefix_no_run_id_starts_with_is_an_unknown_run(runtime: Any) -> None:
    run_id = new_run(runtime)
    absent = next(p for p in ("0000", "ffff", "8888") if not run_id.startswith(p))
    for given in (absent, absent + "-", run_id[:8] + "g", "abc", "xyz-1", run_id[:35] + "!"):
        with pytest.raises(UnknownRun) as caught:
            runtime.get_run(given)
        assert caught.value.run_id == given
    # a prefix is exact: one more character that differs names nothing
    other = "0" if run_id[8 + 1] != "0" else "1"
    with pytest.raises(UnknownRun):
        runtime.get_run(run_id[:9] + other)


def test_an_id_shorter_than_a_prefix_says_how_many_characters_it_takes(runtime: Any) -> None:
    run_id = new_run(runtime)
    short = run_id[:3]  # the start of a real id: too short to name it
    for call in (lambda: runtime.get_run(short), lambda: runtime.send_command(short, "HOLD"),
                 lambda: runtime.cancel(short), lambda: runtime.wait_for(short, 0)):
        with pytest.raises(UnknownRun) as caught:
            call()
        assert str(caught.value) == (f"unknown run {short!r}: a run id prefix needs at least 4 characters "
                                     "(a whole run id has 36 characters)")
        assert caught.value.run_id == short
    assert runtime.store.mailbox.pending(run_id, "cmd", 10) == []  # nothing was sent
    assert runtime.get_run(run_id[:4])["id"] == run_id  # one more character names it
    absent = next(p for p in ("0000", "ffff", "8888") if not run_id.startswith(p))
    with pytest.raises(UnknownRun) as caught:
        runtime.get_run(absent)
    assert str(caught.value) == f"unknown run {absent!r}"  # long enough: it is just not there


def test_listing_filters_combine(runtime: Any) -> None:
    old_v1 = new_run(runtime, "lookup.a", "v1")
    created = runtime.get_run(old_v1)["created_at"]
    wait_until(lambda: runtime.store.clock.now() > datetime.fromisoformat(created).timestamp() + 0.01, 5,
               message="the store clock to pass the first run's creation")
    new_v2 = new_run(runtime, "lookup.a", "v2")
    other_wf = new_run(runtime, "lookup.b", "v2")
    since = runtime.get_run(new_v2)["created_at"]

    def ids(**filters: Any) -> list[str]:
        return [view["id"] for view in runtime.list_runs(limit=100, **filters)]

    assert ids(code_version="v1") == [old_v1]
    assert ids(code_version="v2") == [other_wf, new_v2]
    assert ids(workflow="lookup.a") == [new_v2, old_v1]
    assert ids(workflow="lookup.a", code_version="v2") == [new_v2]
    assert ids(since=datetime.fromisoformat(since)) == [other_wf, new_v2]
    naive = datetime.fromisoformat(since).astimezone(UTC).replace(tzinfo=None)
    assert ids(since=naive) == [other_wf, new_v2]  # a datetime without a time zone is UTC
    assert ids(since=timedelta(hours=1), workflow="lookup.b") == [other_wf]
    assert ids(since=timedelta(0)) == []
    assert ids(status="enqueued", code_version="v2", since=datetime.fromisoformat(since)) == [other_wf, new_v2]
    assert ids(state="HELD") == []  # none has reported a state
    assert ids(code_version="v3") == []
    for bad in ({"since": "10m"}, {"since": timedelta(seconds=-1)}, {"state": ""}, {"code_version": "x" * 65}):
        with pytest.raises(InvalidArgument):
            runtime.list_runs(**bad)
    with pytest.raises(WorkflowError, match="unknown status 'DONE'"):
        runtime.list_runs(status="DONE")
    previous = set_runtime(runtime)  # the seed's API (getWorkflows) passes the filters on
    try:
        facade = getWorkflows()
        assert [v["id"] for v in facade.listRuns(codeVersion="v2", workflow="lookup.a")] == [new_v2]
        assert [v["id"] for v in facade.listRuns("enqueued", 1, since=timedelta(hours=1))] == [other_wf]
        assert facade.listRuns(state="held") == []
    finally:
        set_runtime(previous)
