"""Units in the store, on SQLite and PostgreSQL: one holder per unit; all or none for several; any
one of a class; waiting runs granted in order of priority, then request time, woken by a mailbox
message committed with the grant; a finished run's units free; each grant, release and end an event."""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from exchange._store import codec
from exchange._store import records as r
from exchange._store.records import Fence
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.runs.units import CANCELLED, GRANT_TOPIC, GRANTED, RELEASED, WAITING
from exchange._store.store import Store
from exchange._store.tables import unit_holders


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
