"""The check of runs' audit chains (``exchange audit verify``): reads only.

How a chain is written, and what it covers, is said in :mod:`exchange._store.sql.chain`. A run is
checked link by link, oldest first, and the first link found wrong is named:

- a link whose hash is not that of its stored fields (an event's or a step's field changed);
- a link whose ``chain_prev`` is not the hash of the link before it (a link before it deleted and
  the places renumbered, or hashes recomputed by hand);
- a place that no event or step holds and that no step says it replaced (an entry deleted);
- the run's row naming a newest link (``audit_seq``, ``audit_head``) that is not the newest found
  (the newest entry deleted or changed).

A run with no link (written before the chain existed, or a run that has not begun) is
``unchained``: not a failure. The copies of steps a fork starts with are not links of the fork's
chain (they are checked in their origin's), nor are the progress history's events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import Connection, select

from exchange._store.sql import Database, event_entry, link_hash, step_entry
from exchange._store.tables import events, runs, steps

ChainState = Literal["ok", "tampered", "unchained"]


@dataclass(frozen=True)
class ChainCheck:
    """One run's check: ``problem`` names the first link found wrong (None unless tampered)."""

    run_id: str
    state: ChainState
    links: int  # the places the run's row says its chain has
    head: str | None
    problem: str | None = None


class _Link(NamedTuple):  # a tuple: a million of them are made by a check of a million events
    seq: int
    prev: str | None
    hash: str | None
    computed: str
    replaced: tuple[int, ...]
    what: tuple[Any, ...]  # ("event", id, kind, actor) or ("step", seq, name, status)

    @property
    def name(self) -> str:
        """How a person finds the entry: "event 41 (command, by ann)", "step 3 ('mix', SUCCESS)"."""
        if self.what[0] == "event":
            _, event_id, kind, actor = self.what
            return f"event {event_id} ({kind}{f', by {actor}' if actor else ''})"
        _, seq, name, status = self.what
        return f"step {seq} ({name!r}, {status})"


_EVENT_COLUMNS = (events.c.id, events.c.kind, events.c.at, events.c.actor, events.c.reason, events.c.step_seq,
                  events.c.payload, events.c.chain_seq, events.c.chain_prev, events.c.chain_hash)


def _event_links(run_id: str, rows: Iterable[Any]) -> list[_Link]:
    return [_Link(int(chain_seq), prev, hash_, link_hash(prev, event_entry(run_id, kind, at, actor, reason, step_seq,
                                                                          payload), None),
                  (), ("event", event_id, kind, actor))
            for event_id, kind, at, actor, reason, step_seq, payload, chain_seq, prev, hash_ in rows]


def _step_link(row: Any) -> _Link:
    entry = step_entry(dict(row._mapping))
    replaced = tuple(int(place) for place in (row.chain_replaced or "").split(",") if place)
    computed = link_hash(row.chain_prev, entry, row.chain_replaced)
    return _Link(int(row.chain_seq), row.chain_prev, row.chain_hash, computed, replaced,
                 ("step", row.seq, row.name, row.status))


def _problem(links: Sequence[_Link], count: int, head: str | None) -> str | None:
    by_place: dict[int, _Link] = {}
    for link in links:
        twin = by_place.setdefault(link.seq, link)
        if twin is not link:
            return f"entry {link.seq} of the chain is held twice: {twin.name} and {link.name}"
    replaced = {place for link in links for place in link.replaced}
    before: _Link | None = None  # the newest link found so far
    for place in range(1, count + 1):
        found = by_place.get(place)
        if found is None:
            if place not in replaced:
                nearby = [f"after {before.name}" if before is not None else "the first"]
                following = next((link for link in links if link.seq > place), None)
                if following is not None:
                    nearby.append(f"before {following.name}")
                return f"entry {place} of the chain ({', '.join(nearby)}) was deleted"
            continue
        link = found
        if link.hash != link.computed:
            return f"{link.name} was changed (entry {place} of the chain)"
        expected_prev = before.hash if before is not None and before.seq == place - 1 else None
        if (before is None and place == 1 and link.prev is not None) or (
                expected_prev is not None and link.prev != expected_prev):
            return f"{link.name} does not follow the entry before it (entry {place}): an entry was deleted"
        before = link
    beyond = [link for link in links if link.seq > count]
    if beyond:
        return f"{beyond[0].name} is past the run's newest entry ({count}): the run's head was changed"
    if before is None or before.seq != count or before.hash != head:
        return f"the newest entry ({count} of the chain) was deleted or changed"
    return None


class AuditChains:
    """Reads runs' chains and checks them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def run_ids(self) -> list[str]:
        """Every run, oldest first."""
        with self.db.read() as conn:
            return [str(row[0]) for row in conn.execute(select(runs.c.id).order_by(runs.c.created_at, runs.c.id))]

    def head(self, run_id: str) -> str | None:
        """The hash of the run's newest link (None: none, or no such run)."""
        with self.db.read() as conn:
            return conn.execute(select(runs.c.audit_head).where(runs.c.id == run_id)).scalar()

    def check(self, run_id: str) -> ChainCheck | None:
        """The run's check (None: no such run)."""
        with self.db.read() as conn:
            return self._check(conn, run_id)

    def _check(self, conn: Connection, run_id: str) -> ChainCheck | None:
        row = conn.execute(select(runs.c.audit_seq, runs.c.audit_head).where(runs.c.id == run_id)).first()
        if row is None:
            return None
        count, head = int(row.audit_seq or 0), row.audit_head
        event_rows = conn.execute(
            select(*_EVENT_COLUMNS).where(events.c.run_id == run_id, events.c.chain_seq.is_not(None))).all()
        step_rows = conn.execute(
            select(steps).where(steps.c.run_id == run_id, steps.c.chain_seq.is_not(None))).all()
        links = sorted([*_event_links(run_id, event_rows), *map(_step_link, step_rows)], key=lambda link: link.seq)
        if count == 0 and head is None and not links:
            return ChainCheck(run_id, "unchained", 0, None)
        problem = _problem(links, count, head)
        return ChainCheck(run_id, "ok" if problem is None else "tampered", count, head, problem)
