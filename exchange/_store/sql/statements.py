"""The hot path's statements (step records, starts, claims, commands, leases), typed and named.

They run once per step, per start or per command, where SQLAlchemy's statement machinery costs more
than the statement itself: each is a :class:`~exchange._store.sql.typed_sql.Statement` written once
against the table definitions of :mod:`exchange._store.tables.schema`, with named parameters, spelled for
the store's driver, and run on a :class:`~exchange._store.sql.typed_sql.Cursor` inside a group-commit
unit (:meth:`exchange._store.sql.database.Database.unit`). Every other statement of the store is
SQLAlchemy Core (see docs/architecture.md, "which write path when"); the store suite runs both on
SQLite and PostgreSQL alike.

:class:`Statements` gathers one builder per area, each spelling its statements for the backend it
is given and hiding the differences between SQLite and PostgreSQL behind its methods: ``runs``
(:mod:`~exchange._store.sql.run_statements`), ``steps`` (:mod:`~exchange._store.sql.step_statements`),
``events`` (:mod:`~exchange._store.sql.event_statements`) and ``mail`` (messages and the gateways'
notices, :mod:`~exchange._store.sql.mail_statements`).

The statements an execution of a run makes carry its fence (``fence_run``, ``fence_owner``,
``fence_generation``; see :class:`~exchange._store.records.Fence`) in the statement itself, so each
stays one round trip: ``INSERT ... SELECT ... WHERE EXISTS (SELECT 1 FROM runs WHERE <fence> FOR
SHARE)`` writes a row only while the fence holds, and its row count says whether it did. On
PostgreSQL ``FOR SHARE`` makes a takeover of the run (an UPDATE of its row) wait for this
statement's commit, or this statement wait for the takeover's and then find the fence gone; on
SQLite the one writer at a time gives the same order. (Not a ``WITH fence AS (...)`` form: Python's
sqlite3 reports no row count for a statement that starts with WITH.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from exchange._store.sql.event_statements import EventStatements
from exchange._store.sql.mail_statements import MailStatements
from exchange._store.sql.run_statements import RunStatements
from exchange._store.sql.spelling import FENCE_WHERE, statement
from exchange._store.sql.step_statements import StepStatements
from exchange._store.tables import runs

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend


class Statements:
    """The hot path's statements of a store, spelled once for its backend; timestamps they write
    are ``now()`` (the store's clock)."""

    def __init__(self, backend: Backend, now: Callable[[], float]) -> None:
        self.now = now
        self.events = EventStatements(backend, now)
        self.steps = StepStatements(backend)
        self.mail = MailStatements(backend, now)
        self.runs = RunStatements(backend, now, self.events)
        # Opening a multi-statement fenced transaction: the run row stays locked until the commit.
        self.lock_fence = statement(backend, "lock_fence", f"SELECT 1 FROM {runs.name} WHERE {FENCE_WHERE}" + (
            " FOR NO KEY UPDATE" if backend.row_locks else ""))
        self.store_now = statement(backend, "store_now", f"SELECT {backend.now_sql}")
