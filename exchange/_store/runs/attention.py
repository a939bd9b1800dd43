"""The runs that need someone, read in seven queries (one more when a run is held on its code, and
when one waits long for units): an open prompt, a step held on its failure, a run held because its
history diverges from its code, a phase held by its equipment, a long wait for units, a tag write
in doubt, an ERROR. What makes a row is said in :mod:`exchange._engine.operator.attention`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, or_, select

from exchange._store import codec
from exchange._store import records as r
from exchange._store.runs.phase_notes import phase_note
from exchange._store.runs.prompts import AWAITING_VERIFICATION, WAITING
from exchange._store.sql import Database
from exchange._store.tables import events, prompts, runs, steps, unit_holders, unit_requests

IN_DOUBT_EVENT = "tag_write_in_doubt"
NOTIFIED_EVENT = "attention_notified"  # a webhook was told: (reason, since) in the payload

PROMPT, HELD, CODE, EQUIPMENT = "prompt", "held", "code", "equipment"
UNITS, IN_DOUBT, ERROR = "units", "in_doubt", "error"
# the order people are shown them: the most urgent first
REASONS = (PROMPT, HELD, CODE, EQUIPMENT, UNITS, IN_DOUBT, ERROR)
CODE_HELD_EVENT = "code_held"  # its payload's "since": when the run was held on its code
UNIT_WAITING = "WAITING"  # a unit request's status while its run waits (exchange._store.runs.units)
HELD_BY_EQUIPMENT = "equipment"  # ``held_by`` of a step's progress note (phase.run) the PLC held


@dataclass(frozen=True)
class AttentionRow:
    run_id: str
    workflow: str
    status: r.RunStatus
    state: str | None
    reason: str  # one of REASONS
    since: float  # store clock: when the run came to need someone for this reason
    detail: str


_HEAD = (runs.c.id, runs.c.workflow, runs.c.status, runs.c.state)


def _short_type(name: str | None) -> str:
    """An error's class name without its module (``exchange.errors.FatalError`` -> ``FatalError``)."""
    return (name or "Error").rsplit(".", 1)[-1]


def _unfinished() -> Any:
    return runs.c.status.not_in(r.FINAL_STATUSES)


class AttentionTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def rows(self, *, recent_since: float, limit: int, units_wait_s: float | None = None) -> list[AttentionRow]:
        """Every reason a run needs someone, at most ``limit`` of each: open prompts and held steps of
        unfinished runs; with ``units_wait_s``, unfinished runs waiting for units for longer than
        that; writes in doubt of unfinished runs and of runs finished after ``recent_since``;
        ERROR runs finished after it."""
        with self.db.read() as conn:
            waits = [] if units_wait_s is None else self._unit_waits(conn, units_wait_s, limit)
            return [*self._prompts(conn, limit), *self._held(conn, limit), *self._code(conn, limit),
                    *self._equipment(conn, limit), *waits,
                    *self._in_doubt(conn, recent_since, limit), *self._errors(conn, recent_since, limit)]

    @staticmethod
    def _prompts(conn: Connection, limit: int) -> list[AttentionRow]:
        query = (select(*_HEAD, prompts.c.key, prompts.c.text, prompts.c.status.label("prompt_status"),
                        prompts.c.opened_at, prompts.c.answered_by)
                 .join(runs, runs.c.id == prompts.c.run_id)
                 .where(prompts.c.status.in_(WAITING), _unfinished()).order_by(prompts.c.opened_at).limit(limit))
        found = []
        for row in conn.execute(query):
            waits = (f"answered by {row.answered_by}, waits for verification"
                     if row.prompt_status == AWAITING_VERIFICATION else "waits for an answer")
            found.append(AttentionRow(row.id, row.workflow, row.status, row.state, PROMPT, float(row.opened_at),
                                      f"prompt {row.key!r} {waits}: {row.text}"))
        return found

    @staticmethod
    def _held(conn: Connection, limit: int) -> list[AttentionRow]:
        query = (select(*_HEAD, steps.c.seq, steps.c.name, steps.c.error_type, steps.c.error_message,
                        steps.c.finished_at, steps.c.started_at)
                 .join(runs, runs.c.id == steps.c.run_id)
                 .where(steps.c.status.in_(r.HELD_STEP_STATUSES), _unfinished()).limit(limit))
        return [AttentionRow(row.id, row.workflow, row.status, row.state, HELD,
                             float(row.finished_at if row.finished_at is not None else row.started_at),
                             f"held on step {row.seq} {row.name}: {_short_type(row.error_type)}: {row.error_message}")
                for row in conn.execute(query)]

    @staticmethod
    def _code(conn: Connection, limit: int) -> list[AttentionRow]:
        """Unfinished runs held because their history diverges from the code (state HELD, the run's
        error ``NonDeterminismError``: exchange/_engine/execution/code_hold.py); since when: their
        newest ``code_held`` event says."""
        held = conn.execute(select(*_HEAD, runs.c.error_message, runs.c.updated_at)
                            .where(runs.c.state == "HELD", runs.c.error_type == r.CODE_HELD_ERROR, _unfinished())
                            .limit(limit)).all()
        if not held:
            return []
        newest = (select(events.c.run_id, events.c.payload)
                  .where(events.c.kind == CODE_HELD_EVENT, events.c.run_id.in_([row.id for row in held]))
                  .order_by(events.c.id))
        since: dict[str, float] = {}
        for run_id, payload in conn.execute(newest):  # oldest first: the newest hold's stays
            body = codec.loads(payload)
            if isinstance(body, dict) and isinstance(body.get("since"), int | float):
                since[run_id] = float(body["since"])
        return [AttentionRow(row.id, row.workflow, row.status, row.state, CODE,
                             since.get(row.id, float(row.updated_at)), str(row.error_message)) for row in held]

    @staticmethod
    def _equipment(conn: Connection, limit: int) -> list[AttentionRow]:
        """HELD runs whose step in progress noted that its equipment held it (a PLC phase)."""
        query = (select(*_HEAD, steps.c.seq, steps.c.name, steps.c.output, runs.c.updated_at)
                 .join(runs, runs.c.id == steps.c.run_id)
                 .where(steps.c.status == r.STEP_STARTED, steps.c.output.is_not(None), runs.c.state == "HELD",
                        _unfinished()).limit(limit))
        found = []
        for row in conn.execute(query):
            note = phase_note(row.output)
            if note is None or note.get("held_by") != HELD_BY_EQUIPMENT:
                continue
            since = note.get("held_since")
            found.append(AttentionRow(
                row.id, row.workflow, row.status, row.state, EQUIPMENT,
                float(since) if isinstance(since, int | float) else float(row.updated_at),
                f"phase {note.get('phase')} held by its equipment (the PLC) in step {row.seq} {row.name}; "
                f"RESUME restarts it"))
        return found

    def _unit_waits(self, conn: Connection, wait_s: float, limit: int) -> list[AttentionRow]:
        """Unfinished runs whose request for units has waited for more than ``wait_s``: since it
        asked, the units it waits for and who holds them (a holder row of a finished run is free)."""
        now = self.db.clock.now()
        query = (select(*_HEAD, unit_requests.c.wanted, unit_requests.c.any_of, unit_requests.c.unit_class,
                        unit_requests.c.requested_at, unit_requests.c.seq)
                 .join(runs, runs.c.id == unit_requests.c.run_id)
                 .where(unit_requests.c.status == UNIT_WAITING, unit_requests.c.requested_at <= now - wait_s,
                        _unfinished())
                 .order_by(unit_requests.c.requested_at).limit(limit))
        waiting = conn.execute(query).all()
        if not waiting:
            return []
        holders = dict(conn.execute(select(unit_holders.c.unit, unit_holders.c.run_id)
                                    .join(runs, runs.c.id == unit_holders.c.run_id).where(_unfinished())).all())
        found = []
        for row in waiting:
            wanted = [str(unit) for unit in codec.loads(row.wanted)]
            asked = (f"a unit of class {row.unit_class} ({', '.join(wanted)})" if row.any_of and row.unit_class
                     else ", ".join(wanted))
            held = [f"{unit} held by run {holders[unit]}" for unit in wanted if unit in holders]
            free = [unit for unit in wanted if unit not in holders]
            # a unit free yet not granted is kept for a run that asked before (or with a higher priority)
            kept = "" if not free else f"{', '.join(free)} free" + ("" if held else ", kept for a run before it")
            said = "; ".join([*held, *([kept] if kept else [])])
            found.append(AttentionRow(
                row.id, row.workflow, row.status, row.state, UNITS, float(row.requested_at),
                f"waits for {asked} for {waited_text(now - float(row.requested_at))}"
                f" in step {row.seq}" + (f": {said}" if said else "")))
        return found

    @staticmethod
    def _in_doubt(conn: Connection, recent_since: float, limit: int) -> list[AttentionRow]:
        query = (select(*_HEAD, events.c.at, events.c.payload)
                 .join(runs, runs.c.id == events.c.run_id)
                 .where(events.c.kind == IN_DOUBT_EVENT,
                        or_(_unfinished(), and_(runs.c.finished_at.is_not(None), runs.c.finished_at >= recent_since)))
                 .order_by(events.c.id.desc()).limit(limit))
        found: dict[str, AttentionRow] = {}
        for row in conn.execute(query):
            if row.id in found:  # the newest write in doubt of each run
                continue
            payload = codec.loads(row.payload)
            write = payload if isinstance(payload, dict) else {}
            found[row.id] = AttentionRow(
                row.id, row.workflow, row.status, row.state, IN_DOUBT, float(row.at),
                f"the write of {codec.dumps(write.get('value'))} to {write.get('tag')} is in doubt "
                f"({write.get('resolution') or write.get('error')})")
        return list(found.values())

    @staticmethod
    def _errors(conn: Connection, recent_since: float, limit: int) -> list[AttentionRow]:
        query = (select(*_HEAD, runs.c.finished_at, runs.c.error_type, runs.c.error_message)
                 .where(runs.c.status == r.ERROR, runs.c.finished_at >= recent_since)
                 .order_by(runs.c.finished_at.desc()).limit(limit))
        return [AttentionRow(row.id, row.workflow, row.status, row.state, ERROR, float(row.finished_at),
                             f"{_short_type(row.error_type)}: {row.error_message}") for row in conn.execute(query)]

    def notified(self, run_ids: list[str]) -> set[tuple[str, str, float]]:
        """``(run, reason, since)`` of every webhook notification recorded for these runs."""
        if not run_ids:
            return set()
        with self.db.read() as conn:
            rows = conn.execute(select(events.c.run_id, events.c.payload)
                                .where(events.c.kind == NOTIFIED_EVENT, events.c.run_id.in_(run_ids))).all()
        told: set[tuple[str, str, float]] = set()
        for run_id, payload in rows:
            body = codec.loads(payload)
            if isinstance(body, dict):
                told.add((run_id, str(body.get("reason")), float(body.get("since") or 0.0)))
        return told


def waited_text(seconds: float) -> str:
    """A wait's length as people read it: ``45 s``, ``12 min``, ``3 h 5 min``."""
    if seconds < 120:
        return f"{max(0, int(seconds))} s"
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
