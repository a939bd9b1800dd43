"""Units in the store, on SQLite and PostgreSQL: one holder per unit; all or none for several; any
one of a class; waiting runs granted in order of priority, then request time, woken by a mailbox
message committed with the grant; a finished run's units free; each grant, release and end an event."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import insert, text, update

from exchange._store import codec
from exchange._store import records as r
from exchange._store.records import Fence
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.runs.units import (
    CANCELLED,
    GRANT_TOPIC,
    GRANTED,
    HELD,
    HELD_EVENT,
    RELEASED,
    RESUMED_EVENT,
    WAITING,
)
from exchange._store.store import Store
from exchange._store.tables import runs, unit_holders
from exchange.errors import OwnershipLost
from tests.waiting import wait_until


def a_run(store: Store, name: str, priority: int = 0) -> Fence:
    run_id, _ = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="t",
                                        priority=priority),
                                 holder=Holder(owner=name, node=name, lease_seconds=30.0))
    return Fence(run_id, name, 1)


def grants_to(store: Store, fence: Fence) -> list[list[str]]:
    return [codec.loads(m.payload)["units"] for m in store.mailbox.pending(fence.run_id, GRANT_TOPIC, 10)]


def holders(store: Store) -> dict[str, str]:
    return {h.unit: h.run_id for h in store.units.holders()}


def test_one_holder_a_unit_and_the_next_in_order_on_release(store: Store) -> None:
    first, second, urgent = a_run(store, "a"), a_run(store, "b"), a_run(store, "c", priority=5)
    got = store.units.request(first, 1, ["R1"])
    assert got.status == GRANTED and got.granted == ["R1"] and grants_to(store, first) == [["R1"]]
    waits = store.units.request(second, 1, ["R1"])
    assert waits.status == WAITING and grants_to(store, second) == []
    assert store.units.request(urgent, 1, ["R1"]).status == WAITING  # later, but of a higher priority
    assert store.units.request(second, 1, ["R1"]).id == waits.id  # asked again (a resumed run): the same
    assert [w.run_id for w in store.units.waiting()] == [urgent.run_id, second.run_id]
    assert store.units.release(first, got.id, "the with ended")
    assert not store.units.release(first, got.id, "again")  # released already: nothing more
    assert holders(store) == {"R1": urgent.run_id} and grants_to(store, urgent) == [["R1"]]
    assert store.units.get(first.run_id, 1).status == RELEASED  # type: ignore[union-attr]
    assert [e.kind for e in store.events.list(first.run_id, ["unit_granted", "unit_released"])] == [
        "unit_granted", "unit_released"]
    (granted,) = store.events.list(urgent.run_id, ["unit_granted"])
    assert codec.loads(granted.payload) == {"units": ["R1"], "request": store.units.get(urgent.run_id, 1).id}  # type: ignore[union-attr]


def test_all_or_none_and_what_a_waiting_request_is_owed(store: Store) -> None:
    a, b, c = a_run(store, "a"), a_run(store, "b"), a_run(store, "c")
    store.units.request(a, 1, ["R1"])
    both = store.units.request(b, 1, ["R1", "TK2"])
    assert both.status == WAITING and "TK2" not in holders(store)  # none of them while one is taken
    only_tk2 = store.units.request(c, 1, ["TK2"])
    assert only_tk2.status == WAITING  # TK2 is owed to the earlier request for R1 and TK2
    store.units.release(a, store.units.get(a.run_id, 1).id, "done")  # type: ignore[union-attr]
    assert holders(store) == {"R1": b.run_id, "TK2": b.run_id}
    store.units.release(b, store.units.get(b.run_id, 1).id, "done")  # type: ignore[union-attr]
    assert holders(store) == {"TK2": c.run_id}


def test_any_one_of_a_class(store: Store) -> None:
    runs_ = [a_run(store, name) for name in "abc"]
    granted = [store.units.request(run, 1, ["R1", "R2"], any_of=True, unit_class="reactor") for run in runs_]
    assert [g.granted for g in granted] == [["R1"], ["R2"], None]
    store.units.release(runs_[1], granted[1].id, "done")
    assert holders(store) == {"R1": runs_[0].run_id, "R2": runs_[2].run_id}


def test_a_cancelled_wait_and_a_finished_run_free_what_they_kept(store: Store) -> None:
    a, b, c = a_run(store, "a"), a_run(store, "b"), a_run(store, "c")
    store.units.request(a, 1, ["R1"])
    waiting = store.units.request(b, 1, ["R1", "TK2"])
    blocked = store.units.request(c, 1, ["TK2"])
    assert store.units.cancel(b, waiting.id, "timeout_s passed")
    assert store.units.get(b.run_id, 1).status == CANCELLED  # type: ignore[union-attr]
    assert holders(store)["TK2"] == c.run_id and store.units.get(c.run_id, 1).status == GRANTED  # type: ignore[union-attr]
    assert blocked.status == WAITING  # (as it was returned before the cancel)
    assert store.finish_run(a, r.CANCELLED)  # ended without releasing (a gateway killed, a cancel)
    assert "R1" not in holders(store)  # a finished run's rows count as free
    assert store.units.release_run(a.run_id, "the run ended") == 1
    assert store.units.get(a.run_id, 1).status == RELEASED  # type: ignore[union-attr]


def test_a_run_that_ended_holding_is_released_by_the_gateways_look(store: Store) -> None:
    """Its gateway killed between the run's end and the release: nothing else asks for a unit, yet
    the look every gateway makes at each lease renewal grants the waiting run (an event with why)."""
    holder, waiter = a_run(store, "a"), a_run(store, "b")
    store.units.request(holder, 1, ["R1"])
    store.units.request(waiter, 1, ["R1"])
    assert store.units.release_ended_runs(grace_seconds=0.0) == []  # nothing ended: nothing written
    assert store.finish_run(holder, r.CANCELLED)
    assert store.units.release_ended_runs(grace_seconds=3600.0) == []  # its own release may still come
    assert store.units.get(waiter.run_id, 1).status == WAITING  # type: ignore[union-attr]
    assert store.units.release_ended_runs(grace_seconds=0.0) == [holder.run_id]
    assert holders(store) == {"R1": waiter.run_id} and grants_to(store, waiter) == [["R1"]]
    (released,) = store.events.list(holder.run_id, ["unit_released"])
    assert "ended without releasing" in (released.reason or "")
    assert store.units.release_ended_runs(grace_seconds=0.0) == []


def test_a_stale_fence_neither_asks_nor_releases(store: Store) -> None:
    """A gateway that lost its run (taken over: a new owner and generation) can neither release the
    run's units, nor ask for more, nor end its wait: the new owner's release frees them, once."""
    stale, waiter = a_run(store, "a"), a_run(store, "b")
    got = store.units.request(stale, 1, ["R1"])
    waits = store.units.request(waiter, 1, ["R1"])
    with store.db.transaction("a takeover") as conn:
        conn.execute(update(runs).where(runs.c.id == stale.run_id).values(owner="c", lease_generation=2))
    taker = Fence(stale.run_id, "c", 2)
    for refused in (lambda: store.units.release(stale, got.id, "stale"),
                    lambda: store.units.request(stale, 2, ["R2"]),
                    lambda: store.units.cancel(stale, got.id, "stale")):
        with pytest.raises(OwnershipLost):
            refused()
    assert holders(store) == {"R1": stale.run_id} and [w.id for w in store.units.waiting()] == [waits.id]
    assert store.units.release(taker, got.id, "the with block ended")
    assert holders(store) == {"R1": waiter.run_id}
    with pytest.raises(OwnershipLost):
        store.units.release(stale, got.id, "stale, again")
    assert not store.units.release(taker, got.id, "again")  # released once: the waiter keeps R1
    assert holders(store) == {"R1": waiter.run_id}


def test_a_request_that_must_wait_still_grants_what_a_finished_run_left(store: Store) -> None:
    # A request whose units are all held skips the grant pass, unless something was freed since the
    # last pass: a finished holder's row, or a finished run's wait that kept units for itself.
    a, b, c, d = a_run(store, "a"), a_run(store, "b"), a_run(store, "c"), a_run(store, "d")
    store.units.request(a, 1, ["R1"])
    store.units.request(b, 1, ["R1"])
    store.units.request(c, 1, ["TK2"])
    assert store.finish_run(a, r.CANCELLED)  # ended without releasing R1 (b still waits)
    assert store.units.request(d, 1, ["TK2"]).status == WAITING  # TK2 held: d waits, and b is served
    assert holders(store) == {"R1": b.run_id, "TK2": c.run_id}
    e, f, g = a_run(store, "e"), a_run(store, "f"), a_run(store, "g")
    store.units.request(e, 1, ["R2"])
    kept = store.units.request(f, 1, ["R2", "TK3"])  # waits, and keeps TK3 for itself
    assert store.units.request(g, 1, ["TK3"]).status == WAITING
    assert kept.status == WAITING and store.finish_run(f, r.CANCELLED)  # its wait ended without a cancel
    assert store.units.request(a_run(store, "h"), 1, ["R2"]).status == WAITING
    assert holders(store)["TK3"] == g.run_id  # what f kept went to g at that request
    assert store.units.request(a_run(store, "i"), 1, ["R2", "R3"], any_of=True).status == GRANTED  # R3 free


def test_the_database_refuses_a_second_holder(store: Store) -> None:
    a, b = a_run(store, "a"), a_run(store, "b")
    store.units.request(a, 1, ["R1"])
    with pytest.raises(Exception), store.db.transaction("a second holder") as conn:  # noqa: B017, PT011
        conn.execute(insert(unit_holders).values(unit="R1", run_id=b.run_id, request_id=99, since=0.0))
    assert holders(store) == {"R1": a.run_id}


def a_command(store: Store, fence: Fence, cmd: str) -> list[int]:
    store.send_message(fence.run_id, "cmd", {"cmd": cmd}, actor="op", reason=f"{cmd.lower()} it")
    return [m.id for m in store.mailbox.pending(fence.run_id, "cmd", 10)]


def test_a_held_request_is_passed_over_and_resumes_in_its_place(store: Store) -> None:
    a, b, c = a_run(store, "a"), a_run(store, "b"), a_run(store, "c")
    got = store.units.request(a, 1, ["R1"])
    asked = store.units.request(b, 1, ["R1"])
    store.units.request(c, 1, ["R1"])
    held = r.NewEvent("state", {"state": "HELD"}, "op", None)
    assert store.units.hold(b, asked.id, consumed=a_command(store, b, "HOLD"), new_events=[held], state="HELD")
    assert store.units.get(b.run_id, 1).status == HELD  # type: ignore[union-attr]
    assert store.mailbox.pending(b.run_id, "cmd", 10) == []  # the HOLD consumed with it
    assert store.runs.get(b.run_id).state == "HELD"  # type: ignore[union-attr]
    assert [w.run_id for w in store.units.waiting()] == [c.run_id]
    assert [w.run_id for w in store.units.held_waiters()] == [b.run_id]
    assert store.units.resume(b, asked.id, state="RUNNING")
    assert [w.run_id for w in store.units.waiting()] == [b.run_id, c.run_id]  # its place back
    assert store.units.get(b.run_id, 1).requested_at == asked.requested_at  # type: ignore[union-attr]
    assert store.units.hold(b, asked.id)
    assert not store.units.hold(b, asked.id)  # held already: nothing done
    store.units.release(a, got.id, "done")
    assert holders(store) == {"R1": c.run_id}  # the held run passed over
    assert store.units.held_seconds(store.units.get(b.run_id, 1)) >= 0.0  # type: ignore[arg-type]
    assert store.units.resume(b, asked.id)
    store.units.release(c, store.units.get(c.run_id, 1).id, "done")  # type: ignore[union-attr]
    assert holders(store) == {"R1": b.run_id}
    assert [e.kind for e in store.events.list(b.run_id, [HELD_EVENT, RESUMED_EVENT, "state"])] == [
        "state", HELD_EVENT, RESUMED_EVENT, HELD_EVENT, RESUMED_EVENT]


def test_a_hold_after_the_grant_and_a_stop_or_run_end_while_held(store: Store) -> None:
    a, b, c = a_run(store, "a"), a_run(store, "b"), a_run(store, "c")
    got = store.units.request(a, 1, ["R1"])
    hold_ids = a_command(store, a, "HOLD")
    assert not store.units.hold(a, got.id, consumed=hold_ids, state="HELD")  # granted first: the grant wins
    assert [m.id for m in store.mailbox.pending(a.run_id, "cmd", 10)] == hold_ids  # the HOLD stays
    assert store.runs.get(a.run_id).state != "HELD"  # type: ignore[union-attr]
    stopped, ended = store.units.request(b, 1, ["R1"]), store.units.request(c, 1, ["R1"])
    assert store.units.hold(b, stopped.id) and store.units.hold(c, ended.id)
    assert store.units.cancel(b, stopped.id, "STOP received while the run waited")
    assert store.units.get(b.run_id, 1).status == CANCELLED  # type: ignore[union-attr]
    assert store.units.release_run(c.run_id, "the run ended CANCELLED") == 1
    assert store.units.get(c.run_id, 1).status == CANCELLED  # type: ignore[union-attr]
    assert not store.units.release(b, got.id, "not b's request")  # another run's request is not released
    assert holders(store) == {"R1": a.run_id}


def test_a_request_ended_by_its_run_s_end_is_asked_anew(store: Store) -> None:
    a, b = a_run(store, "a"), a_run(store, "b")
    got = store.units.request(a, 1, ["R1"])
    store.units.release_run(a.run_id, "the run ended CANCELLED")  # (a retry executes it again)
    store.units.request(b, 1, ["R1"])
    again = store.units.request(a, 1, ["R1"])
    assert (again.id, again.status) == (got.id, WAITING) and again.requested_at >= got.requested_at
    assert [w.run_id for w in store.units.waiting()] == [a.run_id]
    timed_out = store.units.request(b, 2, ["R1"])
    assert store.units.cancel(b, timed_out.id, "not granted within 1 s")  # ended by the run itself
    assert store.units.request(b, 2, ["R1"]).status == CANCELLED  # given back as it is
    store.units.release(b, store.units.get(b.run_id, 1).id, "done")  # type: ignore[union-attr]
    assert holders(store) == {"R1": a.run_id}
    assert len(store.mailbox.pending(a.run_id, GRANT_TOPIC, 10)) == 2  # the first grant's and this one's
    store.units.take_grant(a, store.units.get(a.run_id, 1))  # type: ignore[arg-type]
    assert store.mailbox.pending(a.run_id, GRANT_TOPIC, 10) == []


def test_a_grant_to_a_run_that_ends_its_wait_meanwhile_does_not_deadlock(pg_url: str) -> None:
    """PostgreSQL: the grant's event is a link of the waiting run's audit chain, so it locks that
    run's row; the waiting run, ending its wait at that moment (a STOP, its timeout), must not hold
    its own row while it waits for the units' lock the granting transaction holds."""
    store = Store(pg_url)
    try:
        holder, waiter = a_run(store, "a"), a_run(store, "b")
        store.units.request(holder, 1, ["R1"])
        waiting = store.units.request(waiter, 1, ["R1"])
        ended: list[object] = []
        with store.db.transaction("a grant under way") as granting:
            store.units._lock(granting)  # a release of R1 has begun: it holds the units' lock
            thread = threading.Thread(target=lambda: ended.append(store.units.cancel(waiter, waiting.id, "STOP")))
            thread.start()
            wait_until(lambda: _waiting_on_a_lock(store), 10, message="the waiter's end to wait for the lock")
            # the grant writes its event on the waiter's run: its row must be free
            granting.execute(update(runs).where(runs.c.id == waiter.run_id).values(updated_at=store.db.clock.now()))
        thread.join(20)
        assert ended == [True]  # it ended its wait once the grant's transaction was done, no deadlock
    finally:
        store.close()


def _waiting_on_a_lock(store: Store) -> bool:
    with store.db.read() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                      "AND datname = current_database()")).scalar_one())
