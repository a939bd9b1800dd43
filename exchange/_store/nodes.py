"""Node rows: which gateway process holds each node's lock, and when it last saw the lock held.

A gateway that takes a node's lock reads the row its predecessor left (see
:mod:`exchange._store.node_lock`) to tell a predecessor that died from one that only lost its
lock to a store restart and may still be executing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select, update

from exchange._store.database import Database
from exchange._store.schema import nodes


@dataclass(frozen=True)
class NodeRecord:
    node_id: str
    owner: str
    lock_checked_at: float
    started_at: float


class NodeTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, node_id: str) -> NodeRecord | None:
        with self.db.read() as conn:
            row = conn.execute(select(nodes).where(nodes.c.node_id == node_id)).first()
        return None if row is None else NodeRecord(row.node_id, row.owner, row.lock_checked_at, row.started_at)

    def take(self, node_id: str, owner: str) -> NodeRecord | None:
        """Record ``owner`` as the node's lock holder (it holds the lock now); returns the row its
        predecessor left, if any."""
        now = self.db.clock.now()
        with self.db.transaction("the node's holder") as conn:
            row = conn.execute(select(nodes).where(nodes.c.node_id == node_id)).first()
            values = dict(owner=owner, lock_checked_at=now, started_at=now)
            if row is None:
                conn.execute(insert(nodes).values(node_id=node_id, **values))
                return None
            conn.execute(update(nodes).where(nodes.c.node_id == node_id).values(**values))
        return NodeRecord(row.node_id, row.owner, row.lock_checked_at, row.started_at)

    def touch(self, node_id: str, owner: str) -> bool:
        """``owner`` saw its lock held just now; False when the row names another holder."""
        with self.db.transaction("the node's lock check") as conn:
            done = conn.execute(
                update(nodes)
                .where(nodes.c.node_id == node_id, nodes.c.owner == owner)
                .values(lock_checked_at=self.db.clock.now())
            ).rowcount
        return bool(done)
