"""Deleting finished runs with everything that hangs on them, in short batches.

A batch is one transaction: the runs' steps, events, mailbox messages, published values and process
values (the batch record's), then the runs themselves, each statement bounded by the batch's ids,
and the run rows deleted only while they are still finished (a guard in the statement itself,
whatever the caller chose).

Every statement names its rows by a list of ids of one fixed length, :data:`IDS_PER_STATEMENT`
(a shorter list is padded by repeating its last id, which changes nothing an ``IN`` matches). A list
of another length is another SQL text, and the SQLite driver keeps a prepared statement for each
text on each connection (up to 128 of them, 50-80 kB each at a few hundred ids): with a text per
batch size, each pass of retention (its last batch is whatever finished since the one before) added
statements that stayed, and a soak's gateway grew by 10 MB in 20 minutes with no Python object
growing. With one length, a connection that ran retention holds its few statements (about 1 MB at
500 ids) and no more, however many passes follow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from sqlalchemy import delete, func, select

from exchange._store import records as r
from exchange._store.sql import Database
from exchange._store.tables import (
    audit_log,
    events,
    mailbox,
    prompts,
    record_values,
    run_values,
    runs,
    steps,
    streams,
)

_DEPENDENTS = (steps, events, mailbox, run_values, streams, prompts, record_values)
_FINAL = list(r.FINAL_STATUSES)
IDS_PER_STATEMENT = 500  # the length of every id list sent (see the module docstring)

T = TypeVar("T")


def fixed_length_lists(ids: Sequence[T]) -> Iterator[list[T]]:
    """``ids`` in lists of exactly :data:`IDS_PER_STATEMENT` items, the last one padded by
    repeating its last id; nothing for no ids."""
    for first in range(0, len(ids), IDS_PER_STATEMENT):
        chunk = list(ids[first:first + IDS_PER_STATEMENT])
        yield chunk + [chunk[-1]] * (IDS_PER_STATEMENT - len(chunk))


class RetentionTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def finished_before(self, cutoff: float, limit: int) -> list[str]:
        """Up to ``limit`` ids of runs that finished before store time ``cutoff``, oldest first."""
        query = (select(runs.c.id).where(runs.c.status.in_(_FINAL), runs.c.finished_at < cutoff)
                 .order_by(runs.c.finished_at).limit(limit))
        with self.db.read() as conn:
            return list(conn.execute(query).scalars())

    def count_finished_before(self, cutoff: float) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).where(runs.c.status.in_(_FINAL), runs.c.finished_at < cutoff))
                       .scalar_one())

    def finished_count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).where(runs.c.status.in_(_FINAL))).scalar_one())

    def oldest_finished(self, limit: int) -> list[str]:
        """The ids of the ``limit`` runs that finished first."""
        query = select(runs.c.id).where(runs.c.status.in_(_FINAL)).order_by(runs.c.finished_at).limit(limit)
        with self.db.read() as conn:
            return list(conn.execute(query).scalars())

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the finished runs among ``run_ids`` and their rows in every table; how many runs."""
        if not run_ids:
            return 0
        ids = list(run_ids)
        deleted = 0
        with self.db.transaction(f"deleting {len(ids)} finished runs") as conn:
            kept: set[str] = set()
            for listed in fixed_length_lists(ids):
                kept.update(conn.execute(select(runs.c.id).where(runs.c.id.in_(listed),
                                                                 runs.c.status.not_in(_FINAL))).scalars())
            doomed = [run_id for run_id in ids if run_id not in kept]  # never a run that is not finished
            for listed in fixed_length_lists(doomed):
                for table in _DEPENDENTS:
                    conn.execute(delete(table).where(table.c.run_id.in_(listed)))
                deleted += conn.execute(delete(runs).where(runs.c.id.in_(listed), runs.c.status.in_(_FINAL))).rowcount
        return int(deleted)

    def prune_audit(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` finished audit entries recorded before ``cutoff``; how many."""
        with self.db.transaction("pruning the audit log") as conn:
            old = select(audit_log.c.id).where(audit_log.c.at < cutoff, audit_log.c.outcome != "PENDING")
            ids = list(conn.execute(old.order_by(audit_log.c.id).limit(limit)).scalars())
            return sum(int(conn.execute(delete(audit_log).where(audit_log.c.id.in_(listed))).rowcount)
                       for listed in fixed_length_lists(ids))
