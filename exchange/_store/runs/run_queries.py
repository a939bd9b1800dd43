"""The SQLAlchemy Core statements of :mod:`exchange._store.runs.runs` (recovery, takeover), built once per store.

Building a SQLAlchemy statement costs more CPU than running it on a local database (about a
millisecond for a claim), and these run once or twice per workflow. Built once with bind parameters,
each is compiled once and reused; the values come with each execution. Lease times use the
database's clock (``now``), never the caller's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    exists,
    literal_column,
    or_,
    select,
    update,
)

from exchange._store import records as r
from exchange._store.tables import owners, run_columns, runs

_IDS: BindParameter[Any] = bindparam("ids", expanding=True)


class RunQueries:
    def __init__(self, now_sql: str, *, row_locks: bool) -> None:
        """``row_locks``: the database takes row locks (PostgreSQL), so readers of rows about to be
        updated lock them, and concurrent claimers skip what another one locked."""
        self.row_locks = row_locks
        now: ColumnElement[Any] = literal_column(now_sql)
        self.now = now
        lease_until = now + bindparam("lease_seconds")
        # A held run's lease has run out when its own grant has and its owner's row says so too. The
        # owner rows are judged (and, where rows lock, locked) first, in the same transaction: see
        # RunTable._take. An owner with no row renews nothing.
        own_grant_out = or_(runs.c.lease_expires_at.is_(None), runs.c.lease_expires_at < now)
        no_owner_row = ~exists().where(owners.c.owner == runs.c.owner)

        def lease_gone_if(gone_owners: ColumnElement[bool]) -> ColumnElement[bool]:
            """The run has no owner, or its own grant ran out and its owner is one of ``gone_owners``
            or has no row."""
            return or_(runs.c.owner.is_(None), and_(own_grant_out, or_(gone_owners, no_owner_row)))

        in_gone_owners = runs.c.owner.in_(bindparam("gone_owners", expanding=True))
        owner_gone = or_(in_gone_owners, no_owner_row)
        lease_gone = lease_gone_if(in_gone_owners)
        active = runs.c.status.in_(r.ACTIVE_STATUSES)
        holding: dict[Any, Any] = {
            runs.c.status: r.PENDING,
            runs.c.owner: bindparam("new_owner"),
            runs.c.owner_node: bindparam("new_node"),
            runs.c.lease_generation: runs.c.lease_generation + 1,
            runs.c.lease_expires_at: lease_until,
            runs.c.updated_at: bindparam("at"),
        }

        # ----- recovery and takeover of active runs
        of_node = and_(active, runs.c.owner_node == bindparam("node"))
        # Owner rows to lock before taking their runs: those out of date (a takeover), or those of the
        # node's runs (a recovery certain that the node's last gateway is dead). A row another
        # transaction holds (its owner renewing right now) is skipped, and its runs with it.
        stale_owners = select(owners.c.owner).where(owners.c.lease_expires_at < now)
        self.out_of_date_owners = self._locking(stale_owners, skip_locked=True, of=owners)
        self.node_owners = self._locking(
            select(owners.c.owner).where(owners.c.owner.in_(select(runs.c.owner).where(of_node))),
            skip_locked=True, of=owners,
        )
        self.node_runs = self._locking(
            select(runs.c.id).where(of_node, or_(runs.c.owner.is_(None), owner_gone)), skip_locked=True
        )
        self.node_runs_expired = self._locking(select(runs.c.id).where(of_node, lease_gone), skip_locked=True)
        self.expired_runs = self._locking(select(runs.c.id).where(active, lease_gone), skip_locked=True)
        # Whether a takeover could find anything: the same judgement as expired_runs with the
        # out-of-date owners read inline, locking nothing. Most looks find nothing, and then no write
        # transaction is opened (on SQLite every one would take the store's only write lock).
        self.expired_probe = select(runs.c.id).where(active, lease_gone_if(runs.c.owner.in_(stale_owners))).limit(1)
        self.take_active = update(runs).where(runs.c.id.in_(_IDS)).values(holding)
        self.rows = select(*run_columns()).where(runs.c.id.in_(_IDS))

        self.cancel_requested_of = select(runs.c.id, runs.c.cancel_reason).where(
            runs.c.owner == bindparam("f_owner"), active, runs.c.cancel_requested == 1
        )

    def _locking(
        self, query: Select[Any], *, skip_locked: bool = False, key_share: bool = False, of: Table = runs
    ) -> Select[Any]:
        if not self.row_locks:
            return query  # SQLite: the write transaction (BEGIN IMMEDIATE) already excludes every other writer
        if key_share:
            return query.with_for_update(key_share=True)  # FOR NO KEY UPDATE: the row will be updated
        return query.with_for_update(skip_locked=skip_locked, of=of)
