"""``exchange_prompts``: the operator prompts runs wait on, their answers and verifications.

A prompt's life: the run opens it (``OPEN``); a person answers it: with no verification the answer
is final (``ANSWERED``), else it waits for a second person (``AWAITING_VERIFICATION``), who verifies
it (``ANSWERED``) or sends it back (``OPEN`` again). A final answer is also a mailbox message to the
run (topic :func:`answer_topic`), committed with the row's change: the run receives it the way it
receives a command, and a run that was not executing meanwhile finds it when it resumes. A prompt
that runs out of time becomes ``TIMED_OUT``; one ended by STOP, ``CLOSED``. Every change is a run
event with its actor and reason (the audit trail).

Each change of status is conditioned on the status it leaves, in the statement itself, so two
people answering at once (or an answer meeting the timeout) cannot both win.

A prompt's deadline (``deadline_at``, set from the store's clock when the run opens it) is a fact of
the store, not of the run's wait: a person's change (an answer, a verification, a rejection) is
conditioned on the deadline too, measured by the database's own clock in the same transaction
(:func:`~exchange._store.sql.clock.now_sql`), so no answer is taken after it however long no gateway
executed the run; the run, when it next executes, closes the prompt as ``TIMED_OUT``. The time a
change is stamped with (``answered_at``, ``verified_at``) is the same reading, so a stored answer is
always before its deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, literal_column, or_, select, update

from exchange._store import codec
from exchange._store.records import FINAL_STATUSES, Fence
from exchange._store.runs.messages import EventLog
from exchange._store.sql import Database
from exchange._store.tables import mailbox, prompts, runs

OPEN = "OPEN"
AWAITING_VERIFICATION = "AWAITING_VERIFICATION"
ANSWERED = "ANSWERED"
TIMED_OUT = "TIMED_OUT"
CLOSED = "CLOSED"
WAITING = (OPEN, AWAITING_VERIFICATION)  # a person can still act on it

ANSWER_TOPIC_PREFIX = "exchange.prompt:"
LIST_LIMIT_MAX = 10_000


def _signed(payload: dict[str, Any], signature: dict[str, Any] | None) -> dict[str, Any]:
    return payload if signature is None else {**payload, "signature": signature}


def answer_topic(key: str) -> str:
    """The mailbox topic a prompt's final answer is sent on."""
    return ANSWER_TOPIC_PREFIX + key


@dataclass(frozen=True)
class PromptRecord:
    run_id: str
    key: str
    seq: int
    text: str
    fields: dict[str, Any]
    role: str
    verify_role: str | None
    status: str
    opened_at: float
    deadline_at: float | None = None
    answer: dict[str, Any] | None = None
    answered_by: str | None = None
    answered_at: float | None = None
    answer_reason: str | None = None
    verified_by: str | None = None
    verified_at: float | None = None
    verify_reason: str | None = None
    closed_why: str | None = None


def _record(row: Any) -> PromptRecord:
    return PromptRecord(
        run_id=row.run_id, key=row.key, seq=int(row.seq), text=row.text, fields=codec.loads(row.fields),
        role=row.role, verify_role=row.verify_role, status=row.status, opened_at=float(row.opened_at),
        deadline_at=None if row.deadline_at is None else float(row.deadline_at),
        answer=None if row.answer is None else codec.loads(row.answer), answered_by=row.answered_by,
        answered_at=row.answered_at, answer_reason=row.answer_reason, verified_by=row.verified_by,
        verified_at=row.verified_at, verify_reason=row.verify_reason, closed_why=row.closed_why,
    )


# The message a final answer sends to the run, made from the store's time of the change.
Message = Callable[[float], dict[str, Any]]


@dataclass(frozen=True)
class Change:
    """What a person's answer, verification or rejection did: ``done`` (the row changed), else the
    prompt's ``status`` as found (None: no such prompt) and the run's (None: no such run);
    ``timed_out`` when the prompt's deadline had passed (its row may still say it waits: the run
    closes it when it next executes)."""

    done: bool
    status: str | None
    run_status: str | None
    prompt: PromptRecord | None = None
    timed_out: bool = False


class PromptTable:
    def __init__(self, db: Database, events: EventLog) -> None:
        self.db = db
        self._events = events

    # ----- the run's side ------------------------------------------------------------------------
    def open(self, fence: Fence, new: PromptRecord) -> PromptRecord:
        """The prompt ``new.key`` of the run holding ``fence``: created now (with a ``prompt_opened``
        event), or the row already there (a run resumed while waiting; or an earlier prompt of the
        same key, which the caller tells apart by ``seq``)."""
        existing = self.get(fence.run_id, new.key)
        if existing is not None:
            return existing
        with self.db.transaction(f"the prompt {new.key!r}", fence=fence) as conn:
            conn.execute(insert(prompts).values(
                run_id=fence.run_id, key=new.key, seq=new.seq, text=new.text, fields=codec.dumps(new.fields),
                role=new.role, verify_role=new.verify_role, status=OPEN, opened_at=new.opened_at,
                deadline_at=new.deadline_at))
            self._events.add(fence.run_id, "prompt_opened",
                             {"key": new.key, "text": new.text, "role": new.role, "verify_role": new.verify_role},
                             actor=fence.owner, step_seq=new.seq, conn=conn)
        return new

    def close(self, fence: Fence, key: str, status: str, why: str) -> bool:
        """Move a prompt that still waits for a person to ``status`` (TIMED_OUT or CLOSED), with an
        event; False (nothing written) when it no longer waits (an answer came first)."""
        with self.db.transaction(f"the end of the prompt {key!r}", fence=fence) as conn:
            changed = conn.execute(
                update(prompts)
                .where(prompts.c.run_id == fence.run_id, prompts.c.key == key, prompts.c.status.in_(WAITING))
                .values(status=status, closed_why=why)
            ).rowcount
            if changed:
                self._events.add(fence.run_id, "prompt_closed", {"key": key, "status": status},
                                 actor=fence.owner, reason=why, conn=conn)
        return bool(changed)

    # ----- people's side -------------------------------------------------------------------------
    def answer(self, run_id: str, key: str, values: dict[str, Any], *, actor: str, reason: str | None,
               verify: bool, message: Message | None, signature: dict[str, Any] | None = None) -> Change:
        """Record an answer to an OPEN prompt of an unfinished run before its deadline: final
        (``message``, given the store's time of the answer, is sent to the run) or, with ``verify``,
        waiting for verification. ``signature``: the signer's, kept in the event (see
        :mod:`exchange._store.runs.signatures`)."""
        status = AWAITING_VERIFICATION if verify else ANSWERED
        payload: dict[str, Any] = {"key": key, "values": values, "verification": verify}
        return self._change(
            run_id, key, frm=(OPEN,), label=f"an answer to the prompt {key!r}", message=message, actor=actor,
            reason=reason, event=("prompt_answered", _signed(payload, signature)),
            values=dict(status=status, answer=codec.dumps(values), answered_by=actor, answer_reason=reason),
            stamp="answered_at")

    def verify(self, run_id: str, key: str, *, actor: str, reason: str | None, answered_by: str,
               message: Message, signature: dict[str, Any] | None = None) -> Change:
        """The second person's verification of the answer given by ``answered_by`` (the caller has
        checked that ``actor`` is someone else), before the prompt's deadline: final. Not done when
        the answer waiting is no longer that person's (sent back and answered anew meanwhile).
        ``signature``: the verifier's, kept in the event."""
        return self._change(
            run_id, key, frm=(AWAITING_VERIFICATION,), label=f"the verification of the prompt {key!r}",
            message=message, actor=actor, reason=reason, answered_by=answered_by,
            event=("prompt_verified", _signed({"key": key}, signature)),
            values=dict(status=ANSWERED, verified_by=actor, verify_reason=reason), stamp="verified_at")

    def reject(self, run_id: str, key: str, *, actor: str, reason: str | None, answered_by: str,
               signature: dict[str, Any] | None = None) -> Change:
        """The second person sends back the answer given by ``answered_by``, before the prompt's
        deadline: the prompt is OPEN
        again, the answer forgotten (the event keeps it)."""
        return self._change(
            run_id, key, frm=(AWAITING_VERIFICATION,), label=f"the rejection of an answer to {key!r}",
            message=None, actor=actor, reason=reason, answered_by=answered_by,
            event=("prompt_rejected", _signed({"key": key}, signature)),
            values=dict(status=OPEN, answer=None, answered_by=None, answered_at=None, answer_reason=None))

    def _change(self, run_id: str, key: str, *, frm: tuple[str, ...], label: str, message: Message | None,
                actor: str, reason: str | None, event: tuple[str, Any], values: dict[str, Any],
                answered_by: str | None = None, stamp: str | None = None) -> Change:
        """Move the prompt from a status in ``frm`` to ``values`` (``stamp``: the column that gets
        the store's time), if its run is unfinished and its deadline has not passed and, with
        ``answered_by``, the answer waiting is still that person's; with an event and, if given,
        the run's ``message``."""
        with self.db.transaction(label) as conn:
            run_status = conn.execute(select(runs.c.status).where(runs.c.id == run_id)).scalar()
            found = self._get(conn, run_id, key)
            if run_status is None or found is None or run_status in FINAL_STATUSES:
                return Change(False, None if found is None else found.status, run_status, found)
            # One reading of the database's clock decides the deadline and stamps the change.
            now = float(conn.execute(select(literal_column(self.db.now_sql))).scalar_one())
            if found.deadline_at is not None and found.deadline_at <= now and found.status in WAITING:
                return Change(False, found.status, run_status, found, timed_out=True)
            where = [prompts.c.run_id == run_id, prompts.c.key == key, prompts.c.status.in_(frm),
                     or_(prompts.c.deadline_at.is_(None), prompts.c.deadline_at > now)]
            if answered_by is not None:  # the answer the caller checked, not one given since
                where.append(prompts.c.answered_by == answered_by)
            if stamp is not None:
                values = {**values, stamp: now}
            if not conn.execute(update(prompts).where(*where).values(**values)).rowcount:
                return Change(False, found.status, run_status, found)
            kind, payload = event
            self._events.add(run_id, kind, payload, actor=actor, reason=reason, step_seq=found.seq, conn=conn)
            if message is not None:
                self._send(conn, run_id, answer_topic(key), message(now), actor, reason)
        return Change(True, str(values["status"]), run_status, self.get(run_id, key))

    def _send(self, conn: Connection, run_id: str, topic: str, message: dict[str, Any], actor: str,
              reason: str | None) -> None:
        conn.execute(insert(mailbox).values(run_id=run_id, topic=topic, payload=codec.dumps(message), actor=actor,
                                            reason=reason, sent_at=self.db.clock.now()))
        self.db.sql.mail.announce_mail(conn, run_id)  # the gateways' mail watchers learn of it at the commit

    # ----- reads ---------------------------------------------------------------------------------
    @staticmethod
    def _get(conn: Connection, run_id: str, key: str) -> PromptRecord | None:
        row = conn.execute(select(prompts).where(prompts.c.run_id == run_id, prompts.c.key == key)).first()
        return None if row is None else _record(row)

    def get(self, run_id: str, key: str) -> PromptRecord | None:
        with self.db.read() as conn:
            return self._get(conn, run_id, key)

    def waiting(self, *, run_id: str | None = None, limit: int = 1000) -> list[PromptRecord]:
        """Prompts that wait for a person (OPEN or AWAITING_VERIFICATION) in unfinished runs, oldest
        first; of one run if ``run_id`` is given."""
        query = (
            select(prompts).join(runs, runs.c.id == prompts.c.run_id)
            .where(prompts.c.status.in_(WAITING), runs.c.status.not_in(FINAL_STATUSES))
            .order_by(prompts.c.opened_at, prompts.c.run_id).limit(min(int(limit), LIST_LIMIT_MAX))
        )
        if run_id is not None:
            query = query.where(prompts.c.run_id == run_id)
        with self.db.read() as conn:
            return [_record(row) for row in conn.execute(query).all()]
