"""The hot path's typed statements (exchange._store.sql.typed_sql) on both stores: named parameters
checked before anything is sent, lists spread out, casts left alone, and the one unit API's
fence and lane arguments."""

from __future__ import annotations

import pytest

from exchange._store import records as r
from exchange._store.records import Fence
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.sql.spelling import fence_params
from exchange._store.sql.typed_sql import Statement
from exchange._store.store import Store
from exchange.errors import OwnershipLost


def _runs(store: Store, count: int) -> list[str]:
    return [store.create_run(NewRun("typed.wf", "{}", "v1", "test"))[0] for _ in range(count)]


def _statement(store: Store, name: str, template: str, *, fenced: bool = False) -> Statement:
    return Statement(name, template, store.db.backend.paramstyle, fenced=fenced)


def test_a_missing_or_unknown_parameter_is_refused_naming_it_before_anything_is_sent(store: Store) -> None:
    run_id = _runs(store, 1)[0]
    rename = _statement(store, "rename", "UPDATE exchange_runs SET workflow = :workflow WHERE id = :run_id")
    with pytest.raises(ValueError, match=r"statement rename: missing parameters run_id; unknown parameters id"):
        store.db.unit(lambda cur: rename.run(cur, {"workflow": "other", "id": run_id}), "a rename")
    with pytest.raises(ValueError, match=r"statement rename: missing parameters workflow$"):
        rename.bind({"run_id": run_id})
    assert store.runs.get(run_id).workflow == "typed.wf"  # type: ignore[union-attr]
    store.db.unit(rename.bind({"workflow": "other", "run_id": run_id}), "a rename")
    assert store.runs.get(run_id).workflow == "other"  # type: ignore[union-attr]


def test_a_list_parameter_is_spelled_for_each_count_and_an_empty_one_refused(store: Store) -> None:
    ids = _runs(store, 4)
    listed = _statement(store, "listed", "SELECT id FROM exchange_runs WHERE id IN (:ids*) AND queue = :queue")
    for count in (1, 3, 1, 4):
        rows = store.db.query(listed, {"ids": ids[:count], "queue": "default"})
        assert sorted(row[0] for row in rows) == sorted(ids[:count])
    assert len(listed._spelled) == 3  # one spelling per count, reused
    with pytest.raises(ValueError, match="statement listed: parameter ids must be a non-empty list"):
        store.db.query(listed, {"ids": [], "queue": "default"})
    with pytest.raises(ValueError, match="parameter ids must be a non-empty list"):
        store.db.query(listed, {"ids": ids[0], "queue": "default"})  # a string is not a list of ids


def test_a_parameter_used_twice_a_cast_and_a_percent_sign_are_spelled_right(store: Store) -> None:
    cast = "::text" if store.db.backend.name == "postgresql" else ""
    twice = _statement(store, "twice", f"SELECT :a + :a, '5%'{cast}, :b")
    assert store.db.query(twice, {"a": 2, "b": "x"}) == [(4, "5%", "x")]


def test_a_self_fenced_statement_needs_its_fence_and_is_judged_by_its_row_count(store: Store) -> None:
    run_id = _runs(store, 1)[0]
    holder = Holder("me", None, 30.0)
    [claimed] = store.runs.claim(holder, 1)
    fence = Fence(claimed.id, "me", claimed.lease_generation)
    assert claimed.id == run_id
    touch = _statement(store, "touch", "UPDATE exchange_runs SET progress = :progress WHERE id = :fence_run "
                       "AND owner = :fence_owner AND lease_generation = :fence_generation", fenced=True)
    with pytest.raises(ValueError, match="statement touch is fenced: give the unit its fence"):
        store.db.unit(touch.bind({"progress": "1", **fence_params(fence)}), "a touch")
    store.db.unit(touch.bind({"progress": "2", **fence_params(fence)}), "a touch", fence=fence)
    stale = Fence(run_id, "me", claimed.lease_generation - 1)
    with pytest.raises(OwnershipLost):
        store.db.unit(touch.bind({"progress": "3", **fence_params(stale)}), "a touch", fence=stale)
    # A statement without the fence in it, given a fence: the run's row is locked and checked first.
    plain = _statement(store, "plain", "UPDATE exchange_runs SET progress = :progress WHERE id = :run_id")
    with pytest.raises(OwnershipLost):
        store.db.unit(plain.bind({"progress": "4", "run_id": run_id}), "a plain touch", fence=stale)
    assert store.runs.get(run_id).progress == "2"  # type: ignore[union-attr]
    store.db.unit(plain.bind({"progress": "5", "run_id": run_id}), "a plain touch", fence=fence, lane="urgent")
    assert store.runs.get(run_id).progress == "5"  # type: ignore[union-attr]
    assert store.runs.get(run_id).status == r.RUNNING  # type: ignore[union-attr]


def test_a_fenced_statement_without_the_fence_parameters_is_a_mistake_found_when_written() -> None:
    with pytest.raises(ValueError, match="statement bad: a fenced statement needs the fence's parameters"):
        Statement("bad", "UPDATE exchange_runs SET progress = :p WHERE id = :run_id", "named", fenced=True)
