"""Child workflows, streams, the value history, checkTimeout and sleep_ms, in a real engine on SQLite
and PostgreSQL: a parent starts and waits for children, cancelling it cancels them, streams keep
every value once and in order."""

from __future__ import annotations

import time
from typing import Any

import pytest

from exchange.errors import InvalidArgument, OutsideRunError, UnknownRun
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_ms
from tests.engine.conftest import Engine
from tests.waiting import wait_until


@workflow(name="fam.child")
def child(n: int, hold: bool = False) -> int:
    rt = getWorkflows()
    while hold:
        rt.recv("never", timeoutSeconds=0.1)
    return n * n


@workflow(name="fam.parent")
def parent(count: int, hold: bool = False) -> dict[str, Any]:
    rt = getWorkflows()
    ids = [rt.startChild("fam.child", {"n": i, "hold": hold}) for i in range(count)]
    results = [rt.waitFor(child_id, 60)["result"] for child_id in ids]
    return {"children": ids, "results": results}


@workflow(name="fam.streamer")
def streamer(values: list[Any]) -> int:
    rt = getWorkflows()
    for value in values:
        rt.writeStream("level", value)
    rt.setEvent("phase", "filling")
    rt.setEvent("phase", "mixing")
    sleep_ms(30)
    return len(values)


@workflow(name="fam.timed")
def timed(overrun: bool) -> Any:
    rt = getWorkflows()
    left = rt.checkTimeout()
    if overrun:
        while True:
            rt.recv("never", timeoutSeconds=0.05)
            rt.checkTimeout()
    return left


def test_a_parent_starts_children_waits_for_them_and_show_links_both_ways(engine: Engine) -> None:
    rt = getWorkflows()
    view = rt.waitFor(rt.start("fam.parent", {"count": 3}), 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["results"] == [0, 1, 4]
    names = [s["name"] for s in view["steps"]]
    assert names == ["exchange.startChild"] * 3 + ["exchange.waitFor"] * 3
    assert [c["id"] for c in view["children"]] == view["result"]["children"]
    assert {c["status"] for c in view["children"]} == {"SUCCESS"} and view["parent_run_id"] is None
    for child_id in view["result"]["children"]:
        child_view = rt.getRun(child_id)
        assert child_view["parent_run_id"] == view["id"] and child_view["created_by"] == f"run:{view['id']}"


def test_cancelling_a_parent_cancels_its_children(engine: Engine) -> None:
    rt = getWorkflows()
    parent_id = rt.start("fam.parent", {"count": 2, "hold": True})
    wait_until(lambda: len(rt.getRun(parent_id)["children"]) == 2
               and all(c["status"] == "RUNNING" for c in rt.getRun(parent_id)["children"]), timeout_s=20,
               message="two children running")
    rt.cancel(parent_id, "wrong recipe")
    for child in rt.getRun(parent_id)["children"]:
        done = rt.waitFor(child["id"], 20)
        assert done["status"] == "CANCELLED" and "wrong recipe" in done["error"]["message"]
    assert rt.waitFor(parent_id, 20)["status"] == "CANCELLED"


def test_a_parent_that_times_out_takes_its_children_along(engine: Engine) -> None:
    rt = getWorkflows()
    parent_id = rt.start("fam.parent", {"count": 1, "hold": True}, timeoutSeconds=1.0)
    assert rt.waitFor(parent_id, 20)["status"] == "CANCELLED"
    (child,) = rt.getRun(parent_id)["children"]
    assert rt.waitFor(child["id"], 20)["status"] == "CANCELLED"


def test_streams_keep_every_value_in_order_and_values_keep_their_history(engine: Engine) -> None:
    rt = getWorkflows()
    values = [{"level": 1.5}, 2, "three", None, [4]]
    run_id = rt.start("fam.streamer", {"values": values})
    assert rt.waitFor(run_id, 20)["status"] == "SUCCESS"
    stream = rt.readStream(run_id, "level")
    assert [item["value"] for item in stream] == values
    seqs = [item["seq"] for item in stream]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [item["value"] for item in rt.readStream(run_id, "level", after=seqs[1], limit=2)] == values[2:4]
    assert rt.readStream(run_id, "nothing") == []
    assert [h["value"] for h in rt.getEventHistory(run_id, "phase")] == ["filling", "mixing"]
    assert rt.getEvent(run_id, "phase") == "mixing"
    with pytest.raises(UnknownRun):
        rt.readStream("0000ffff-0000-0000-0000-000000000000", "level")
    with pytest.raises(InvalidArgument, match="readStream: limit"):
        rt.readStream(run_id, "level", limit=0)
    with pytest.raises(OutsideRunError):
        rt.writeStream("level", 1)


def test_check_timeout_tells_the_time_left_and_ends_an_overrun(engine: Engine) -> None:
    rt = getWorkflows()
    assert rt.waitFor(rt.start("fam.timed", {"overrun": False}), 20)["result"] is None
    left = rt.waitFor(rt.start("fam.timed", {"overrun": False}, timeoutSeconds=30), 20)["result"]
    assert 0 < left <= 30
    started = time.monotonic()
    over = rt.waitFor(rt.start("fam.timed", {"overrun": True}, timeoutSeconds=0.5), 20)
    assert over["status"] == "CANCELLED" and "timeout" in over["error"]["message"]
    assert time.monotonic() - started < 10


@workflow(name="fam.publisher")
def publisher() -> None:
    rt = getWorkflows()
    for round_no in (1, 2):
        rt.setEvent("phase", round_no)
        rt.writeStream("level", round_no)
        while rt.recv("next", timeoutSeconds=60) is None:
            pass


@workflow(name="fam.reader")
def reader(source: str) -> dict[str, Any]:
    rt = getWorkflows()
    seen = {"event": rt.getEvent(source, "phase", 30),
            "stream": [v["value"] for v in rt.readStream(source, "level")],
            "history": [v["value"] for v in rt.getEventHistory(source, "phase")],
            "nothing yet": rt.getEvent(source, "no such key", 0)}
    while rt.recv("go on", timeoutSeconds=60) is None:
        pass
    return seen


def published(rt: Any, source: str) -> int | None:
    """The publisher's last round whose event and stream value are both in the store (it writes
    them in two commits: a reader that saw the event alone could still find the stream short)."""
    phase = rt.getEvent(source, "phase")
    levels = [v["value"] for v in rt.readStream(source, "level")]
    return phase if levels and levels[-1] == phase else None


def test_what_a_run_reads_of_another_run_is_recorded_and_replayed_as_read(engine: Engine) -> None:
    """getEvent, readStream and getEventHistory in a workflow body steer it like a received message:
    a run resumed after a restart must take the answers it got, not what the other run published
    since."""
    rt = getWorkflows()
    source = rt.start("fam.publisher", {})
    wait_until(lambda: published(rt, source) == 1, 20, message="published round 1")
    run_id = rt.start("fam.reader", {"source": source})
    wait_until(lambda: [s["name"] for s in rt.getRun(run_id)["steps"]][-3:]
               == ["exchange.getEvent", "exchange.readStream", "exchange.getEventHistory"], 20,
               message="the reads recorded")
    engine.restart()  # the reader is suspended in its wait and resumed by the new gateway: a replay
    rt = getWorkflows()
    rt.send(source, "next", True)
    wait_until(lambda: published(rt, source) == 2, 20, message="published round 2")
    rt.send(run_id, "go on", True)
    view = rt.waitFor(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"event": 1, "stream": [1], "history": [1], "nothing yet": None}
    names = [s["name"] for s in view["steps"]]
    assert names.count("exchange.getEvent") == 1  # the empty answer is quiet: no row
    rt.send(source, "next", True)
    assert rt.waitFor(source, 30)["status"] == "SUCCESS"


def test_reading_another_run_inside_a_step_is_a_plain_read(engine: Engine) -> None:
    rt = getWorkflows()
    source = rt.start("fam.publisher", {})
    wait_until(lambda: published(rt, source) == 1, 20, message="published round 1")
    run_id = rt.start("fam.step_reader", {"source": source})
    view = rt.waitFor(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == [1, [1]]
    assert [s["name"] for s in view["steps"]] == ["fam.read_in_step"]
    rt.cancel(source)


@step(name="fam.read_in_step")
def read_in_step(source: str) -> list[Any]:
    rt = getWorkflows()
    return [rt.getEvent(source, "phase", 1), [v["value"] for v in rt.readStream(source, "level")]]


@workflow(name="fam.step_reader")
def step_reader(source: str) -> list[Any]:
    return read_in_step(source)
