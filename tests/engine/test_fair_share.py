"""A gateway's share of the work among the live gateways of its store: the arithmetic, the store's
count of live gateways and the runs they hold, and a takeover that takes a share then the rest.
Against SQLite and PostgreSQL (the multi-process behaviour: tests/fault/test_sharing.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import update

from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.gateway.fair_share import MIN_GRACE_SECONDS, FairShare, fair_share
from exchange._engine.operator.runtime import Runtime
from exchange._store.gateways.nodes import NodeLoad
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.store import Store
from exchange._store.tables.schema import nodes
from exchange.workflows.bootstrap import getWorkflows, workflow
from tests.engine.conftest import make_runtime
from tests.waiting import wait_until

LIVE_WITHIN_SECONDS = 3.0


def holder(owner: str, lease_seconds: float = 30.0) -> Holder:
    return Holder(owner=owner, node=owner.split("/")[0], lease_seconds=lease_seconds)


def enqueue(store: Store, n: int, queue: str = "default") -> None:
    for _ in range(n):
        store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="tester", queue=queue))


def make_dead(store: Store, node_id: str) -> None:
    """The node's gateway last saw its lock long ago (it died)."""
    with store.db.transaction("test: an old lock check") as conn:
        conn.execute(update(nodes).where(nodes.c.node_id == node_id)
                     .values(lock_checked_at=store.clock.now() - 100 * LIVE_WITHIN_SECONDS))


@pytest.mark.parametrize(("waiting", "held_by_all", "mine", "peers", "share"), [
    (3000, 0, 0, 1, 3000),  # alone: everything
    (3000, 0, 0, 3, 1000),  # a burst released at once: a third each
    (2000, 1000, 0, 3, 1000),  # the second gateway to look, after the first took its third
    (4, 0, 0, 3, 2),  # a small batch: rounded up, the others take the rest
    (4, 30, 20, 3, 0),  # holding more than its share: the others take them
    (30, 0, 0, 2, 15),
    (5, 100, 0, 2, 5),  # never more than what waits
    (0, 10, 0, 2, 0),
])
def test_a_share_brings_a_gateway_to_an_equal_part_of_all_the_work(
    waiting: int, held_by_all: int, mine: int, peers: int, share: int
) -> None:
    assert fair_share(waiting, held_by_all, mine, peers) == share


def test_runs_the_other_gateways_do_not_take_are_taken_after_the_grace(store: Store) -> None:
    """Two live gateways: this one takes its share and leaves the rest; while the other one takes
    runs (the runs it holds grow) that goes on, and once it takes none for the grace, this one takes
    every run that waits (the other one's workers may all be busy)."""
    for node in ("a", "b"):
        store.nodes.take(node, f"{node}/1")
    enqueue(store, 50)
    store.runs.claim(holder("a/1"), 20)
    store.runs.claim(holder("b/1"), 10)
    share = FairShare(store.nodes, "a", None, renew_interval_seconds=1.0, turn_seconds=0.01)
    assert share.grace_seconds == MIN_GRACE_SECONDS

    def look() -> tuple[int, bool]:
        return share.claim_limit(2000, store.runs.count_claimable)

    assert look() == (5, True)  # 20 waiting, 30 held: 25 each, a holds 20
    store.runs.claim(holder("a/1"), 5)
    store.runs.claim(holder("b/1"), 1)  # the other gateway takes one
    assert look() == (0, True)  # a holds its share; the grace starts again, b is taking
    started = time.monotonic()
    wait_until(lambda: time.monotonic() - started >= MIN_GRACE_SECONDS, 5)
    assert look() == (14, False)  # b took none since: a takes every run that waits


def test_the_store_counts_live_gateways_and_the_runs_each_holds(store: Store) -> None:
    for node in ("a", "b", "dead"):
        store.nodes.take(node, f"{node}/1")
    make_dead(store, "dead")
    enqueue(store, 6)
    enqueue(store, 2, queue="line2")
    store.runs.claim(holder("a/1"), 3, ["default"])
    store.runs.claim(holder("b/1"), 1, ["default"])
    store.runs.claim(holder("dead/1"), 2)
    store.runs.claim(holder("b/1"), 2, ["line2"])

    assert store.nodes.count_live(LIVE_WITHIN_SECONDS) == 2
    load = store.nodes.load(LIVE_WITHIN_SECONDS)
    assert (load.live_nodes, load.held, load.held_by_all) == (2, {"a": 3, "b": 3}, 6)  # the dead node's not counted
    assert store.nodes.load(LIVE_WITHIN_SECONDS, ["default"]).held == {"a": 3, "b": 1}
    assert store.nodes.load(LIVE_WITHIN_SECONDS, ["line9"]).held == {}


def test_a_takeover_among_live_gateways_takes_a_share_then_what_nobody_took(store: Store) -> None:
    for node in ("a", "b", "dead"):
        store.nodes.take(node, f"{node}/1")
    enqueue(store, 6)
    store.runs.register_owner("dead/1", 0.01)
    store.runs.claim(holder("dead/1", lease_seconds=0.01), 6)
    make_dead(store, "dead")
    time.sleep(0.05)  # let the 10 ms leases lapse (fault set-up, not a wait for a condition)
    share = FairShare(store.nodes, "a", None, renew_interval_seconds=LIVE_WITHIN_SECONDS / 3)
    share.refresh()
    assert share.peers == 2

    first = store.runs.take_over_expired(holder("a/1"), limit_of=share.takeover_limiter())
    assert len(first) == 3  # half of the six: the other live gateway gets the rest
    mine = {rec.id for rec in first}
    # b did not take them by a's next pass, nor by the one after (a pass of b that overlapped a's
    # found nothing): the second leaves them too (a holds its share), the third takes them all.
    assert store.runs.take_over_expired(holder("a/1"), exclude=mine, limit_of=share.takeover_limiter()) == []
    third = store.runs.take_over_expired(holder("a/1"), exclude=mine, limit_of=share.takeover_limiter())
    assert len(third) == 3 and not mine & {rec.id for rec in third}
    assert store.nodes.load(LIVE_WITHIN_SECONDS).held == {"a": 6}


def test_a_gateway_alone_takes_every_expired_run_and_claims_for_every_free_worker(store: Store) -> None:
    store.nodes.take("a", "a/1")
    share = FairShare(store.nodes, "a", None, renew_interval_seconds=1.0)
    share.refresh()
    assert share.peers == 1
    assert share.takeover_limiter() is None

    def count_waiting() -> int:
        raise AssertionError("a gateway alone must not count the waiting runs to claim")

    assert share.claim_limit(2000, count_waiting) == (2000, False)


def test_a_claim_among_live_gateways_leaves_the_others_their_share(store: Store) -> None:
    for node in ("a", "b", "c"):
        store.nodes.take(node, f"{node}/1")
    enqueue(store, 30)
    shares = {node: FairShare(store.nodes, node, None, renew_interval_seconds=1.0) for node in "abc"}
    taken = {}
    for node, share in shares.items():  # one after another, as their dispatch turns come
        limit, leaves = share.claim_limit(2000, store.runs.count_claimable)
        taken[node] = len(store.runs.claim(holder(f"{node}/1"), limit))
        assert leaves == (node != "c")
    assert taken == {"a": 10, "b": 10, "c": 10}


def test_only_gateways_that_serve_one_of_the_queues_are_peers(store: Store) -> None:
    store.nodes.take("line1", "line1/1", ["line1"])
    store.nodes.take("line2", "line2/1", ["line2"])
    store.nodes.take("both", "both/1", ["line2", "line1", "line2"])
    store.nodes.take("every", "every/1")  # no --queue: every queue
    store.nodes.take("dead", "dead/1", ["line1"])
    make_dead(store, "dead")
    enqueue(store, 3, queue="line1")
    store.runs.claim(holder("line1/1"), 2, ["line1"])
    store.runs.claim(holder("both/1"), 1, ["line1"])

    assert store.nodes.count_live(LIVE_WITHIN_SECONDS, ["line1"]) == 3  # line1, both, every
    assert store.nodes.count_live(LIVE_WITHIN_SECONDS, ["line2"]) == 3  # line2, both, every
    assert store.nodes.count_live(LIVE_WITHIN_SECONDS, ["line3"]) == 1  # every
    assert store.nodes.count_live(LIVE_WITHIN_SECONDS, ["line1", "line2"]) == 4
    assert store.nodes.count_live(LIVE_WITHIN_SECONDS) == 4  # a gateway of every queue: all are peers
    load = store.nodes.load(LIVE_WITHIN_SECONDS, ["line1"])
    assert (load.live_nodes, load.held) == (3, {"line1": 2, "both": 1})
    assert store.nodes.load(LIVE_WITHIN_SECONDS, ["line3"]) == NodeLoad(1, {})

    alone = FairShare(store.nodes, "line2", ["line2"], renew_interval_seconds=LIVE_WITHIN_SECONDS / 3)
    store.nodes.take("every", "every/2", ["line1"])  # restarted with --queue line1: no peer of line2 now
    store.nodes.take("both", "both/2", ["line1"])
    alone.refresh()
    assert alone.peers == 1


@workflow(name="fair.long_lived")
def long_lived() -> str:
    while getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=60) is None:
        pass
    return "stopped"


def test_a_gateway_per_line_claims_its_lines_runs_as_if_alone(store_url: str, tmp_path: Path) -> None:
    """Two gateways, one per line, on one store: each is alone for its line's runs. Before, each
    counted the other as a peer, so a run started on a line whose gateway held more than half of
    "all the work" was left for the other gateway, which could not take it, for the grace (1 s)."""
    gateways: list[tuple[Runtime, Dispatcher]] = []
    try:
        for line in ("line1", "line2"):
            (tmp_path / line).mkdir()
            runtime = make_runtime(store_url, tmp_path / line, node_id=f"gw-{line}")
            dispatcher = Dispatcher(runtime, queues=[line])
            gateways.append((runtime, dispatcher))
            dispatcher.start()
        (line1, gateway1), _ = gateways
        wait_until(lambda: line1.store.nodes.count_live(LIVE_WITHIN_SECONDS) == 2, 20,
                   message="both gateways alive")
        first = [line1.start("fair.long_lived", {}, queue="line1") for _ in range(2)]
        wait_until(lambda: all(line1.store.runs.get(run_id).status == "RUNNING" for run_id in first), 20,
                   message="the first runs of line 1 running")
        gateway1.share.refresh()  # as at its lease renewal: the other gateway is alive and counted
        assert gateway1.share.peers == 1
        run_id = line1.start("fair.long_lived", {}, queue="line1")
        # Claimed in the start's own commit, as by a gateway alone (with a peer: left to the claims)
        assert line1.store.runs.get(run_id).status == "RUNNING"
        for started in (*first, run_id):
            line1.send_command(started, "STOP")
        for started in (*first, run_id):
            assert line1.wait_for(started, 30)["status"] == "SUCCESS"
    finally:
        for runtime, dispatcher in gateways:
            dispatcher.stop()
            runtime.close()
