"""Node rows: which gateway process holds each node's lock, and when it last saw the lock held.

A gateway that takes a node's lock reads the row its predecessor left (see
:mod:`exchange._store.gateways.node_lock`) to tell a predecessor that died from one that only lost its
lock to a store restart and may still be executing. The same rows tell the gateways of a store
how many of them are alive, and how many runs each holds (:meth:`NodeTable.load`), so that they
share the work (:mod:`exchange._engine.gateway.fair_share`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, func, insert, select, update

from exchange._store import records as r
from exchange._store.sql import Database
from exchange._store.tables import nodes, runs


@dataclass(frozen=True)
class NodeRecord:
    node_id: str
    owner: str
    lock_checked_at: float
    started_at: float


@dataclass(frozen=True)
class NodeLoad:
    """The live nodes of a store and the active runs each holds (nodes holding none are absent)."""

    live_nodes: int
    held: dict[str, int] = field(default_factory=dict)

    @property
    def held_by_all(self) -> int:
        return sum(self.held.values())


class NodeTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, node_id: str) -> NodeRecord | None:
        with self.db.read() as conn:
            row = conn.execute(select(nodes).where(nodes.c.node_id == node_id)).first()
        return None if row is None else NodeRecord(row.node_id, row.owner, row.lock_checked_at, row.started_at)

    def take(self, node_id: str, owner: str, queues: Sequence[str] | None = None) -> NodeRecord | None:
        """Record ``owner`` as the node's lock holder (it holds the lock now), serving ``queues``
        (None: every queue); returns the row its predecessor left, if any."""
        now = self.db.clock.now()
        served = None if not queues else json.dumps(sorted(set(queues)))
        with self.db.transaction("the node's holder") as conn:
            row = conn.execute(select(nodes).where(nodes.c.node_id == node_id)).first()
            values = dict(owner=owner, lock_checked_at=now, started_at=now, queues=served)
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

    def count_live(self, within_seconds: float, queues: Sequence[str] | None = None) -> int:
        """How many nodes saw their lock held in the last ``within_seconds`` (store clock) and serve
        one of ``queues`` at least (None: whatever they serve): the gateways alive on this store
        that could take a run of those queues, each counted once (a hot standby does not hold its
        node's lock)."""
        with self.db.read() as conn:
            return len(self._live_peers(conn, within_seconds, queues))

    def load(self, within_seconds: float, queues: Sequence[str] | None = None) -> NodeLoad:
        """The live nodes (as :meth:`count_live`) and the active runs each of them holds, of
        ``queues`` if given. Two reads on one connection."""
        with self.db.read() as conn:
            live = self._live_peers(conn, within_seconds, queues)
            held = (select(runs.c.owner_node, func.count())
                    .where(runs.c.status.in_(r.ACTIVE_STATUSES), runs.c.owner_node.in_(live))
                    .group_by(runs.c.owner_node))
            if queues:
                held = held.where(runs.c.queue.in_(list(queues)))
            by_node = {str(node): int(n) for node, n in conn.execute(held)} if live else {}
        return NodeLoad(len(live), by_node)

    def _live_peers(self, conn: Connection, within_seconds: float, queues: Sequence[str] | None) -> list[str]:
        """The live nodes that serve one of ``queues`` (every node does when either side serves
        every queue). Few rows: the queues are compared here, not in SQL."""
        since = self.db.clock.now() - within_seconds
        rows = conn.execute(select(nodes.c.node_id, nodes.c.queues).where(nodes.c.lock_checked_at > since))
        wanted = set(queues) if queues else None
        return [str(node_id) for node_id, served in rows
                if wanted is None or served is None or wanted & set(json.loads(served))]
