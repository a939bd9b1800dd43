"""The hot path's statements of step records: a step row inserted (or a RETRYING row updated) in a
unit that holds the run's fence, or carrying the fence itself.

Each write of a step row is a link of its run's audit chain (:mod:`~exchange._store.sql.chain`):
the run's head moved on first (which locks the run's row where rows lock), then the row written
with its link copied from the run's row. A row written again lists the place its previous link
took in ``chain_replaced``, and its new link's hash covers that list.

Where a statement may modify data in its WITH (PostgreSQL), the two are one statement: the run's
UPDATE ... RETURNING its new link, and the row written from what it returned. A step then costs one
statement, as it did before the chain (each statement is a message psycopg spends as much Python on
as the server spends executing a step's INSERT); SQLite, in process, sends the two."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from exchange._store.records import Fence, StepRecord
from exchange._store.sql.chain import head_moved, step_entry
from exchange._store.sql.commits import Deferred
from exchange._store.sql.spelling import FENCE_WHERE, STEP_COLUMNS, fence_params, fenced_refusal, statement, values_of
from exchange._store.sql.typed_sql import Cursor, Statement
from exchange._store.tables import runs, steps

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend

_STEP_UPDATED = STEP_COLUMNS[2:]
# The places a row's earlier links took, this write's previous one added (of the row's old values).
_REPLACED = ("CASE WHEN s.chain_seq IS NULL THEN s.chain_replaced "
             "ELSE COALESCE(s.chain_replaced || ',', '') || CAST(s.chain_seq AS TEXT) END")
_LINK_OF_RUN = f"(SELECT {{}} FROM {runs.name} WHERE id = :run_id)"


class StepStatements:
    """Step records, spelled for ``backend``."""

    def __init__(self, backend: Backend) -> None:
        replaced_of_row = (f"(SELECT {_REPLACED} FROM {steps.name} s "
                           f"WHERE s.run_id = :run_id AND s.seq = :seq)")
        insert_head = f"UPDATE {runs.name} SET {head_moved(backend.sha256_sql, ':chain_entry')} WHERE "
        updated_entry = f":chain_entry || COALESCE({replaced_of_row}, '')"  # its hash covers the replaced places
        update_head = f"UPDATE {runs.name} SET {head_moved(backend.sha256_sql, updated_entry)} WHERE "
        self.chain_insert = statement(backend, "chain_step_insert", insert_head + "id = :run_id")
        self.chain_insert_fenced = statement(backend, "chain_step_insert_fenced",
                                             insert_head + f"id = :run_id AND {FENCE_WHERE}")
        self.chain_update = statement(backend, "chain_step_update", update_head + "id = :run_id")
        self.chain_update_fenced = statement(backend, "chain_step_update_fenced",
                                             update_head + f"id = :run_id AND {FENCE_WHERE}")
        insert_step = (f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}, chain_seq, chain_prev, chain_hash) "
                       f"SELECT {values_of(STEP_COLUMNS)}, audit_seq, audit_prev, audit_head FROM {runs.name} "
                       "WHERE id = :chain_run")  # the run's id again: PostgreSQL types a parameter once
        self.insert_step = statement(backend, "insert_step", insert_step)
        self.insert_step_fenced = statement(backend, "insert_step_fenced", f"{insert_step} AND {FENCE_WHERE}")
        link = ", ".join(f"{c} = {_LINK_OF_RUN.format(f)}"
                         for c, f in (("chain_seq", "audit_seq"), ("chain_prev", "audit_prev"),
                                      ("chain_hash", "audit_head")))
        update_step = (f"UPDATE {steps.name} AS s SET {', '.join(f'{c} = :{c}' for c in _STEP_UPDATED)}, "
                       f"chain_replaced = {_REPLACED}, {link} WHERE s.run_id = :run_id AND s.seq = :seq")
        self.update_step = statement(backend, "update_step", update_step)
        self.update_step_fenced = statement(
            backend, "update_step_fenced",
            f"{update_step} AND EXISTS (SELECT 1 FROM {runs.name} WHERE {FENCE_WHERE})")
        self._linked: dict[tuple[bool, bool], tuple[Statement, ...]] = {
            (False, False): (self.chain_insert, self.insert_step),
            (False, True): (self.chain_insert_fenced, self.insert_step_fenced),
            (True, False): (self.chain_update, self.update_step),
            (True, True): (self.chain_update_fenced, self.update_step_fenced),
        }
        if backend.writing_with:
            # One statement: the run's head moved on and RETURNING the link the row copies. The
            # run's id in the UPDATE is :chain_run (PostgreSQL types a parameter once, and :run_id
            # is also a value of the INSERT's list).
            returning = " RETURNING audit_seq, audit_prev, audit_head"
            linked_insert = (f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}, chain_seq, chain_prev, "
                             f"chain_hash) SELECT {values_of(STEP_COLUMNS)}, audit_seq, audit_prev, audit_head "
                             "FROM link")
            linked_update = (f"UPDATE {steps.name} AS s SET {', '.join(f'{c} = :{c}' for c in _STEP_UPDATED)}, "
                             f"chain_replaced = {_REPLACED}, chain_seq = link.audit_seq, "
                             "chain_prev = link.audit_prev, chain_hash = link.audit_head FROM link "
                             "WHERE s.run_id = :run_id AND s.seq = :seq")
            for (replace, fenced), name in (((False, False), "step_insert_linked"),
                                            ((False, True), "step_insert_linked_fenced"),
                                            ((True, False), "step_update_linked"),
                                            ((True, True), "step_update_linked_fenced")):
                head = update_head if replace else insert_head
                where = ("id = :run_id" if replace else "id = :chain_run") + (f" AND {FENCE_WHERE}" if fenced else "")
                self._linked[replace, fenced] = (statement(backend, name, (
                    f"WITH link AS ({head}{where}{returning}) {linked_update if replace else linked_insert}")),)

    @staticmethod
    def step_params(run_id: str, rec: StepRecord) -> dict[str, object]:
        params: dict[str, object] = {
            "run_id": run_id, "seq": rec.seq, "name": rec.name, "status": rec.status, "attempts": rec.attempts,
            "output": rec.output, "error_type": rec.error_type, "error_message": rec.error_message,
            "error_blob": rec.error_blob, "skipped_ops": rec.skipped_ops, "next_attempt_at": rec.next_attempt_at,
            "started_at": rec.started_at, "finished_at": rec.finished_at,
            "side_effect": 1 if rec.side_effect else None,
        }
        params["chain_entry"] = step_entry(params) + "|"
        params["chain_run"] = run_id
        return params

    def linked(self, *, replace: bool, fenced: bool) -> tuple[Statement, ...]:
        """The statements that write a step row as a link of the chain, in order: the run's head
        moved on, then the row (``fenced``: each carrying the fence's parameters); one statement
        doing both where the backend writes in a WITH. The last one's row count says whether the
        row was written."""
        return self._linked[replace, fenced]

    def record_step(self, cur: Cursor, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        """Insert (or, with ``replace``, update) a step row inside a unit that already holds the
        run's fence."""
        params = self.step_params(run_id, rec)
        for linked in self.linked(replace=replace, fenced=False):
            linked.run_some(cur, params)

    def record_step_in(self, conn: Connection, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        """:meth:`record_step` in a SQLAlchemy transaction (the writes outside the hot path)."""
        params = self.step_params(run_id, rec)
        for linked in self.linked(replace=replace, fenced=False):
            linked.run_in(conn, {name: params[name] for name in linked.names})

    def fenced_step(self, fence: Fence, rec: StepRecord, *, replace: bool) -> Callable[[Cursor], Deferred[None]]:
        """A unit recording ``rec`` (insert, or update of a RETRYING row) that carries its fence
        itself (give it to ``Database.unit`` without ``fence=``): OwnershipLost, nothing written,
        when the fence no longer holds the run."""
        params = self.step_params(fence.run_id, rec)
        params.update(fence_params(fence))  # in place: no third dict to merge the two into
        linked = self.linked(replace=replace, fenced=True)

        def write(cur: Cursor) -> Deferred[None]:
            for each in linked:
                each.run_some(cur, params)  # the last one's row count says whether the fence held
            return fenced_refusal(fence, cur)

        return write
