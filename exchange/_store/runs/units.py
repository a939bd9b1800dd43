"""``exchange_unit_holders`` and ``exchange_unit_requests``: which run holds each unit, and who waits.

A run asks for units (:meth:`UnitTable.request`): all of the names it gives (taken all or none, so
two runs taking two units in opposite orders never deadlock), or any one of them (a unit class). A
request is granted by a *grant pass*, run in the transaction of every change that can free or ask for
a unit (a request, a release, a cancel): waiting requests in order of run priority, then request
time, each granted when its units are free; the units an earlier request waits for are kept for it,
so a later one cannot overtake it for them. A grant writes the holder rows, the request's status and
a mailbox message to the run (topic :data:`GRANT_TOPIC`), in that transaction: the run, waiting on its
mailbox, is woken at once, on whatever gateway it executes.

A request held by a HOLD (:meth:`UnitTable.hold`) is HELD: the pass passes over it (another run may
take the units it waited for) until a RESUME (:meth:`UnitTable.resume`) makes it WAITING again with
its request time, so it keeps its place. The hold and the resume each commit, in one transaction,
the request's status, the command's consumption and events, the run's reported state and a
``unit_request_held`` / ``unit_request_resumed`` event whose times say how long it was held (a
timeout does not run while held: :meth:`UnitTable.held_seconds`).

A request ended by its run's end (:meth:`UnitTable.release_run`) is asked again when the run
executes again (a retry): :meth:`UnitTable.request` makes it WAITING anew, under the same id.

At most one holder per unit is the database's own rule: a unit is the primary key of its holder row.
Changes of units are one at a time (SQLite: one writer; PostgreSQL: a table lock each takes before
it writes anything).
A holder row of a run that has finished (however it ended, even with its gateway killed before it
released) counts as free: the next pass deletes it, and the gateways look for such runs at every
lease renewal (:meth:`UnitTable.release_ended_runs`), so what waits for their units is granted even
when no other run asks for or releases a unit. Every grant, release and cancel is a run event
(``unit_granted``, ``unit_released``, ``unit_request_ended``) with the run and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, or_, select, update

from exchange._store import codec
from exchange._store.records import FINAL_STATUSES, MESSAGE_CONSUMED, Fence, NewEvent
from exchange._store.runs.messages import EventLog
from exchange._store.sql import Database
from exchange._store.tables import events, mailbox, runs, unit_holders, unit_requests
from exchange.errors import OwnershipLost

WAITING, HELD, GRANTED, RELEASED, CANCELLED = "WAITING", "HELD", "GRANTED", "RELEASED", "CANCELLED"
OPEN = (WAITING, HELD)  # a request not granted yet, and not given up
GRANT_TOPIC = "exchange.unit"  # a grant's message to the run: {"request": id, "units": [...]}
GRANTOR = "exchange"  # the actor of a grant (the pass that made it, not a person), and of a run's end
HELD_EVENT, RESUMED_EVENT = "unit_request_held", "unit_request_resumed"
_ENDED_EVENTS = ("unit_released", "unit_request_ended")


@dataclass(frozen=True)
class UnitRequest:
    id: int
    run_id: str
    seq: int
    wanted: list[str]
    any_of: bool
    unit_class: str | None
    priority: int
    requested_at: float
    status: str
    granted: list[str] | None = None
    granted_at: float | None = None
    ended_at: float | None = None
    ended_why: str | None = None


@dataclass(frozen=True)
class UnitHolder:
    unit: str
    run_id: str
    request_id: int
    since: float


def _request(row: Any) -> UnitRequest:
    return UnitRequest(
        id=int(row.id), run_id=row.run_id, seq=int(row.seq), wanted=codec.loads(row.wanted),
        any_of=bool(row.any_of), unit_class=row.unit_class, priority=int(row.priority),
        requested_at=float(row.requested_at), status=row.status,
        granted=None if row.granted is None else codec.loads(row.granted),
        granted_at=None if row.granted_at is None else float(row.granted_at),
        ended_at=None if row.ended_at is None else float(row.ended_at), ended_why=row.ended_why,
    )


class UnitTable:
    def __init__(self, db: Database, events: EventLog) -> None:
        self.db = db
        self._events = events

    # ----- the run's side ------------------------------------------------------------------------
    def request(self, fence: Fence, seq: int, wanted: Sequence[str], *, any_of: bool = False,
                unit_class: str | None = None) -> UnitRequest:
        """The request of the run holding ``fence`` at sequence ``seq``: made now with the run's
        priority (and granted at once when the pass can), or the one already there (a run resumed
        while it waited, or after it was granted meanwhile). ``wanted``: the unit names, all of
        them, or with ``any_of`` one.

        A request there that the run's end ended (released or cancelled by :meth:`release_run`), or
        that is GRANTED but holds no unit any more (its run ended without releasing, and a pass
        freed them), is asked anew, under its id: WAITING with ``wanted``, the run's priority and a
        new request time (the run executes again: a retry). One ended by the run itself (the
        ``with`` released it, its timeout, a STOP) is returned as it is. A read only, when nothing
        is to be written."""
        if not wanted or len(set(wanted)) != len(wanted):
            raise ValueError(f"a unit request needs distinct unit names, got {list(wanted)!r}")
        existing = self.get(fence.run_id, seq)
        if existing is not None and (existing.status in OPEN
                                     or (existing.status == GRANTED and self.holds(existing.id))):
            return existing
        with self.db.transaction(f"a request for units {', '.join(wanted)}", fence=fence,
                                 lock_first=self._lock) as conn:
            priority = int(conn.execute(select(runs.c.priority).where(runs.c.id == fence.run_id)).scalar_one() or 0)
            row = conn.execute(select(unit_requests).where(unit_requests.c.run_id == fence.run_id,
                                                           unit_requests.c.seq == seq)).first()
            values = dict(wanted=codec.dumps(list(wanted)), any_of=1 if any_of else 0, unit_class=unit_class,
                          priority=priority, requested_at=self.db.clock.now(), status=WAITING, granted=None,
                          granted_at=None, ended_at=None, ended_why=None)
            if row is None:
                conn.execute(insert(unit_requests).values(run_id=fence.run_id, seq=seq, **values))
                if not self._must_wait(conn, list(wanted), any_of):  # else a pass could grant nothing
                    self._grant_pass(conn)
            else:
                if self._asked_anew(conn, _request(row)):
                    conn.execute(delete(unit_holders).where(unit_holders.c.request_id == row.id))
                    conn.execute(update(unit_requests).where(unit_requests.c.id == row.id).values(**values))
                self._grant_pass(conn)
            # What it commits, read in the transaction (no change of units comes between: the lock)
            # rather than in a read of its own after it: one connection and round trip fewer.
            found = conn.execute(select(unit_requests).where(unit_requests.c.run_id == fence.run_id,
                                                             unit_requests.c.seq == seq)).first()
        assert found is not None  # just written
        return _request(found)

    def _asked_anew(self, conn: Connection, request: UnitRequest) -> bool:
        if request.status in OPEN:
            return False
        if request.status == GRANTED:
            held = conn.execute(select(unit_holders.c.unit).where(unit_holders.c.request_id == request.id)).first()
            return held is None
        ended_by = conn.execute(
            select(events.c.actor).where(events.c.run_id == request.run_id, events.c.step_seq == request.seq,
                                         events.c.kind.in_(_ENDED_EVENTS))
            .order_by(events.c.id.desc()).limit(1)).scalar()
        return ended_by == GRANTOR  # release_run's: the run ended (and now executes again)

    def hold(self, fence: Fence, request_id: int, *, consumed: Sequence[int] = (),
             outcomes: Mapping[int, tuple[str, str | None]] | None = None, new_events: Sequence[NewEvent] = (),
             state: str | None = None, why: str | None = None) -> bool:
        """A HOLD: the WAITING request ``request_id`` of the run becomes HELD (the pass passes over
        it, and grants what it kept to others), in one transaction with the consumption of the
        messages ``consumed`` (each with its ``outcomes`` entry, default CONSUMED), ``new_events``,
        the run's reported ``state`` and a ``unit_request_held`` event (``why``). False, and nothing
        written, when it no longer waits (granted meanwhile: the HOLD stays in the mailbox)."""
        return self._turn(fence, request_id, WAITING, HELD, HELD_EVENT, consumed, outcomes, new_events, state, why)

    def resume(self, fence: Fence, request_id: int, *, consumed: Sequence[int] = (),
               outcomes: Mapping[int, tuple[str, str | None]] | None = None, new_events: Sequence[NewEvent] = (),
               state: str | None = None, why: str | None = None) -> bool:
        """A RESUME: the HELD request waits again, in its place (its request time is kept), and is
        granted at once when the pass can; as :meth:`hold` otherwise (``unit_request_resumed``)."""
        return self._turn(fence, request_id, HELD, WAITING, RESUMED_EVENT, consumed, outcomes, new_events, state,
                          why)

    def _turn(self, fence: Fence, request_id: int, frm: str, to: str, kind: str, consumed: Sequence[int],
              outcomes: Mapping[int, tuple[str, str | None]] | None, new_events: Sequence[NewEvent],
              state: str | None, why: str | None) -> bool:
        with self.db.transaction(f"unit request {request_id}: {to}", fence=fence,
                                 lock_first=self._lock) as conn:
            row = conn.execute(select(unit_requests).where(unit_requests.c.id == request_id,
                                                           unit_requests.c.run_id == fence.run_id)).first()
            if row is None or row.status != frm:
                return False
            _consume(conn, fence, consumed, int(row.seq), outcomes, self.db.clock.now())
            conn.execute(update(unit_requests).where(unit_requests.c.id == request_id).values(status=to))
            for event_kind, payload, actor, reason in new_events:
                self._events.add(fence.run_id, event_kind, payload, actor=actor, reason=reason,
                                 step_seq=int(row.seq), conn=conn)
            self._events.add(fence.run_id, kind, {"request": request_id, "wanted": codec.loads(row.wanted)},
                             actor=fence.owner, reason=why, step_seq=int(row.seq), conn=conn)
            if state is not None:
                conn.execute(update(runs).where(runs.c.id == fence.run_id)
                             .values(state=state, updated_at=self.db.clock.now()))
            self._grant_pass(conn)
        return True

    def take_grant(self, fence: Fence, request: UnitRequest) -> None:
        """Consume the grant messages of the run's ``request`` (at its sequence number): for a grant
        that no step records (a retry or a fork asking again for the units of a replayed grant). A
        read only when there is none (a run resumed while it held them)."""
        query = select(mailbox.c.id, mailbox.c.payload).where(
            mailbox.c.run_id == fence.run_id, mailbox.c.topic == GRANT_TOPIC, mailbox.c.consumed_at.is_(None))
        with self.db.read() as conn:
            ids = [int(r.id) for r in conn.execute(query) if codec.loads(r.payload).get("request") == request.id]
        if ids:
            with self.db.transaction(f"unit request {request.id}: its grant received", fence=fence) as conn:
                _consume(conn, fence, ids, request.seq, None, self.db.clock.now())

    def release(self, fence: Fence, request_id: int, why: str) -> bool:
        """Release the units a GRANTED request of the run holds (an event per unit, ``why``) and
        grant what waits for them; False when it holds none any more (released before, or not the
        run's request)."""
        with self.db.transaction(f"the release of unit request {request_id}", fence=fence,
                                 lock_first=self._lock) as conn:
            ended = self._end(conn, [request_id], (GRANTED,), RELEASED, why, actor=fence.owner, run_id=fence.run_id)
            self._grant_pass(conn)
        return bool(ended)

    def cancel(self, fence: Fence, request_id: int, why: str) -> bool:
        """End a WAITING or HELD request of the run (its timeout passed, a STOP) and grant what its
        place kept; False when it no longer waits (granted meanwhile: the caller releases it then)."""
        with self.db.transaction(f"the end of unit request {request_id}", fence=fence,
                                 lock_first=self._lock) as conn:
            ended = self._end(conn, [request_id], OPEN, CANCELLED, why, actor=fence.owner, run_id=fence.run_id)
            self._grant_pass(conn)
        return bool(ended)

    def release_run(self, run_id: str, why: str) -> int:
        """Everything of a run that ended: its units released, its waits cancelled, and what waits
        for them granted; how many requests it ended. Idempotent (a pass treats a finished run's
        holder rows as free anyway: this makes the grants happen now, not at the next pass)."""
        with self.db.transaction(f"run {run_id}: the release of its units") as conn:
            self._lock(conn)
            rows = conn.execute(select(unit_requests.c.id, unit_requests.c.status).where(
                unit_requests.c.run_id == run_id, unit_requests.c.status.in_((*OPEN, GRANTED)))).all()
            ended = self._end(conn, [int(r.id) for r in rows if r.status == GRANTED], (GRANTED,), RELEASED, why,
                              actor=GRANTOR)
            ended += self._end(conn, [int(r.id) for r in rows if r.status in OPEN], OPEN, CANCELLED, why,
                               actor=GRANTOR)
            self._grant_pass(conn)
        return ended

    def release_ended_runs(self, grace_seconds: float, limit: int = 100) -> list[str]:
        """Release what runs that ended more than ``grace_seconds`` ago (store clock) still hold or
        wait for, as :meth:`release_run` does, and grant it to the runs waiting: the repair of a run
        whose gateway was killed between the run's end and its release, or whose release failed (a
        store outage). The runs released (``limit`` at most). A read that locks nothing finds them:
        a gateway calls this at every lease renewal, and there is nothing to do almost always."""
        cutoff = self.db.clock.now() - grace_seconds
        query = (select(unit_requests.c.run_id).join(runs, runs.c.id == unit_requests.c.run_id)
                 .where(unit_requests.c.status.in_((*OPEN, GRANTED)), runs.c.status.in_(FINAL_STATUSES),
                        or_(runs.c.finished_at.is_(None), runs.c.finished_at < cutoff))
                 .distinct().limit(limit))
        with self.db.read() as conn:
            ended = sorted(conn.execute(query).scalars())
        for run_id in ended:
            self.release_run(run_id, "the run had ended without releasing them (its gateway stopped first)")
        return ended

    # ----- reads ---------------------------------------------------------------------------------
    def get(self, run_id: str, seq: int) -> UnitRequest | None:
        with self.db.read() as conn:
            row = conn.execute(select(unit_requests).where(unit_requests.c.run_id == run_id,
                                                           unit_requests.c.seq == seq)).first()
        return None if row is None else _request(row)

    def holders(self) -> list[UnitHolder]:
        """Who holds which unit now (a finished run's rows left out: they are free), by unit."""
        query = (select(unit_holders).join(runs, runs.c.id == unit_holders.c.run_id)
                 .where(runs.c.status.not_in(FINAL_STATUSES)).order_by(unit_holders.c.unit))
        with self.db.read() as conn:
            return [UnitHolder(r.unit, r.run_id, int(r.request_id), float(r.since)) for r in conn.execute(query)]

    def held_by(self, run_id: str) -> list[str]:
        """The units the run ``run_id`` holds now, by name."""
        with self.db.read() as conn:
            return sorted(conn.execute(select(unit_holders.c.unit).where(unit_holders.c.run_id == run_id)).scalars())

    def waiting(self) -> list[UnitRequest]:
        """The requests that wait, in the order they will be granted."""
        with self.db.read() as conn:
            return [_request(row) for row in conn.execute(_waiting_query()).all()]

    def held_waiters(self) -> list[UnitRequest]:
        """The requests held by a HOLD (passed over until a RESUME), in the order they would be granted."""
        with self.db.read() as conn:
            return [_request(row) for row in conn.execute(_waiting_query(HELD)).all()]

    def holds(self, request_id: int) -> list[str]:
        """The units the request ``request_id`` holds now (holder rows), by name."""
        with self.db.read() as conn:
            return sorted(conn.execute(select(unit_holders.c.unit)
                                       .where(unit_holders.c.request_id == request_id)).scalars())

    def held_seconds(self, request: UnitRequest) -> float:
        """How long ``request`` has been held by HOLDs since it was (last) asked for, the hold going
        on included (store clock): what its timeout does not count."""
        with self.db.read() as conn:
            rows = conn.execute(select(events.c.kind, events.c.at).where(
                events.c.run_id == request.run_id, events.c.step_seq == request.seq,
                events.c.kind.in_((HELD_EVENT, RESUMED_EVENT)), events.c.at >= request.requested_at)
                .order_by(events.c.id)).all()
        held_s, since = 0.0, None
        for kind, at in rows:
            if kind == HELD_EVENT:
                since = float(at)
            elif since is not None:
                held_s, since = held_s + max(0.0, float(at) - since), None
        if since is not None:
            held_s += max(0.0, self.db.clock.now() - since)
        return held_s

    def of_run(self, run_id: str) -> list[UnitRequest]:
        with self.db.read() as conn:
            rows = conn.execute(select(unit_requests).where(unit_requests.c.run_id == run_id)
                                .order_by(unit_requests.c.seq)).all()
        return [_request(row) for row in rows]

    # ----- inside a transaction ------------------------------------------------------------------
    def _end(self, conn: Connection, request_ids: list[int], frm: tuple[str, ...], status: str, why: str,
             *, actor: str, run_id: str | None = None) -> int:
        ended = 0
        now = self.db.clock.now()
        for request_id in request_ids:
            row = conn.execute(select(unit_requests).where(unit_requests.c.id == request_id)).first()
            if row is None or row.status not in frm or (run_id is not None and row.run_id != run_id):
                continue
            changed = conn.execute(update(unit_requests).where(unit_requests.c.id == request_id,
                                                               unit_requests.c.status.in_(frm))
                                   .values(status=status, ended_at=now, ended_why=why)).rowcount
            if not changed:
                continue
            ended += 1
            if status == RELEASED:
                units = codec.loads(row.granted) if row.granted else []
                conn.execute(delete(unit_holders).where(unit_holders.c.request_id == request_id))
                self._events.add(row.run_id, "unit_released", {"units": units, "request": request_id},
                                 actor=actor, reason=why, step_seq=int(row.seq), conn=conn)
            else:
                self._events.add(row.run_id, "unit_request_ended",
                                 {"wanted": codec.loads(row.wanted), "request": request_id, "status": status},
                                 actor=actor, reason=why, step_seq=int(row.seq), conn=conn)
        return ended

    def _lock(self, conn: Connection) -> None:
        """One change of units at a time (PostgreSQL; SQLite has one writer anyway), taken before the
        change writes anything, and before the fence's lock of the run's own row: a grant locks
        other runs' rows (the event it writes is a link of their audit chains), so a change that
        held its run's row while it waited for this lock would deadlock with a grant to that run."""
        self.db.backend.lock_table_for_inserts(conn, unit_holders)

    def _must_wait(self, conn: Connection, wanted: list[str], any_of: bool) -> bool:
        """Whether a pass made now, just after a new request for ``wanted`` was written, would grant
        nothing, so the request can skip it: nothing was freed since the last pass (no holder row
        of a finished run, no waiting request of one, which kept units for itself), and the new
        request cannot be granted (all of its units, or with ``any_of`` each of them, held).
        Every other change runs a pass, so the last one granted all it could; a new request can
        only keep more units, never free one. This keeps a request from reading every waiting
        request: a thousand runs queuing for one unit made a thousand passes over up to a
        thousand rows each (bench/units.py)."""
        if self._free_finished_holders(conn):
            return False
        ended_waiting = (select(unit_requests.c.id).join(runs, runs.c.id == unit_requests.c.run_id)
                         .where(unit_requests.c.status == WAITING, runs.c.status.in_(FINAL_STATUSES)).limit(1))
        if conn.execute(ended_waiting).first() is not None:
            return False
        held = set(conn.execute(select(unit_holders.c.unit).where(unit_holders.c.unit.in_(wanted))).scalars())
        return held == set(wanted) if any_of else bool(held)

    def _free_finished_holders(self, conn: Connection) -> int:
        """Delete the holder rows of runs that finished (their units are free); how many."""
        finished = select(runs.c.id).where(runs.c.status.in_(FINAL_STATUSES))
        return int(conn.execute(delete(unit_holders).where(unit_holders.c.run_id.in_(finished))).rowcount or 0)

    def _grant_pass(self, conn: Connection) -> list[tuple[UnitRequest, list[str]]]:
        """Grant what can be granted now, in order (see the module docstring); the grants made. The
        caller took :meth:`_lock` first in the transaction."""
        self._free_finished_holders(conn)
        held = {row.unit for row in conn.execute(select(unit_holders.c.unit))}
        kept: set[str] = set()  # units an earlier waiting request is owed
        grants: list[tuple[UnitRequest, list[str]]] = []
        now = self.db.clock.now()
        for row in conn.execute(_waiting_query()).all():
            request = _request(row)
            free = [unit for unit in request.wanted if unit not in held and unit not in kept]
            if request.any_of:
                take = free[:1]
            else:
                take = request.wanted if len(free) == len(request.wanted) else []
            if not take:
                if not request.any_of:
                    kept.update(request.wanted)  # all or none: what it waits for is kept for it
                continue
            for unit in take:
                conn.execute(insert(unit_holders).values(unit=unit, run_id=request.run_id, request_id=request.id,
                                                         since=now))
            held.update(take)
            conn.execute(update(unit_requests).where(unit_requests.c.id == request.id)
                         .values(status=GRANTED, granted=codec.dumps(take), granted_at=now))
            self._events.add(request.run_id, "unit_granted", {"units": take, "request": request.id},
                             actor=GRANTOR, step_seq=request.seq, conn=conn)
            conn.execute(insert(mailbox).values(
                run_id=request.run_id, topic=GRANT_TOPIC, payload=codec.dumps({"request": request.id, "units": take}),
                actor=GRANTOR, reason=None, sent_at=now))
            self.db.sql.mail.announce_mail(conn, request.run_id)  # the run's gateway learns of it at the commit
            grants.append((request, take))
        return grants


def _consume(conn: Connection, fence: Fence, ids: Sequence[int], seq: int,
             outcomes: Mapping[int, tuple[str, str | None]] | None, now: float) -> None:
    """Mark the run's messages ``ids`` consumed at ``seq``; OwnershipLost, before anything is
    written, when one is consumed already (another execution received it: this one is stale)."""
    if not ids:
        return
    unconsumed = conn.execute(select(func.count()).select_from(mailbox).where(
        mailbox.c.id.in_(list(ids)), mailbox.c.run_id == fence.run_id, mailbox.c.consumed_at.is_(None))).scalar_one()
    if int(unconsumed) != len(ids):
        raise OwnershipLost(fence.run_id, "a message it received was consumed by another execution")
    for message_id in ids:
        outcome, note = (outcomes or {}).get(message_id, (MESSAGE_CONSUMED, None))
        conn.execute(update(mailbox).where(mailbox.c.id == message_id)
                     .values(consumed_seq=seq, consumed_at=now, outcome=outcome, outcome_note=note))


def _waiting_query(status: str = WAITING) -> Any:
    """The requests of unfinished runs in ``status``, in grant order: priority, then request time."""
    return (select(unit_requests).join(runs, runs.c.id == unit_requests.c.run_id)
            .where(unit_requests.c.status == status, runs.c.status.not_in(FINAL_STATUSES))
            .order_by(unit_requests.c.priority.desc(), unit_requests.c.requested_at, unit_requests.c.id))
