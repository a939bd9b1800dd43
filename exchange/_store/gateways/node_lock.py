"""One gateway per node id and store: the lock that lets a restarted node take back its runs at once.

A restarted gateway takes back every unfinished run of its node without waiting for their leases to
run out (that is what makes recovery and a hot standby fast). That is only safe while no other live
process executes them, which this lock guarantees:

- SQLite stores use an advisory file lock beside the database file
  (:mod:`~exchange._store.sql.file_lock`). The operating system frees it only when the holding
  process exits (kill -9 included), so a free lock means its holder is dead.
- PostgreSQL stores use a session advisory lock. The server frees it when the holder's session ends:
  the process died, or the session was cut (a server restart, a dropped connection) while the
  process lives on. The lock is therefore re-checked on its own session at every lease renewal
  (:meth:`NodeLock.check`), and its loss stops the holder's executions. A gateway that takes the lock
  tells the two cases apart with the node's row (:mod:`exchange._store.gateways.nodes`): if its
  predecessor saw the lock held after the server's last start, the session ended on a live server,
  so the predecessor is gone and its runs are taken at once; otherwise (the server restarted since)
  the predecessor may still be executing until its leases run out, so only runs whose lease expired
  are taken.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from exchange._store.gateways.nodes import NodeTable
from exchange._store.sql import Database, describe, try_lock, unlock
from exchange.errors import StoreError

log = logging.getLogger(__name__)

# While a waiting gateway cannot reach PostgreSQL, it tries again this often.
RETRY_AFTER_STORE_ERROR_SECONDS = 0.5


class NodeLock:
    """The lock of ``node_id`` on the store of ``db``, for the gateway process ``owner``."""

    def __init__(self, db: Database, nodes: NodeTable, node_id: str, owner: str,
                 queues: Sequence[str] | None = None) -> None:
        self.db = db
        self.nodes = nodes
        self.node_id = node_id
        self.owner = owner
        self.queues = list(queues) if queues else None  # what the node row says its gateway serves
        self._file: IO[str] | None = None
        self._conn: Any = None  # PostgreSQL: the session that holds (or tries for) the lock
        self._failing = False  # the store failed at the last try: say so once, not at every retry
        key = int.from_bytes(hashlib.sha256(node_id.encode()).digest()[:8], "big", signed=True)
        self._key = key
        unsigned = key & 0xFFFFFFFFFFFFFFFF
        self._class_id, self._obj_id = unsigned >> 32, unsigned & 0xFFFFFFFF  # as pg_locks shows it

    # ----- taking the lock ------------------------------------------------------------------------
    def acquire(self, *, wait: bool = False, poll_seconds: float = 0.01, stop: threading.Event | None = None) -> bool:
        """Take the lock, or raise StoreError naming the node id and the store.

        With ``wait`` (a standby gateway) keep trying every ``poll_seconds`` until the lock is free,
        which happens the moment the active gateway's process dies, riding out store outages; ``stop``
        ends the wait early (then StoreError as well).

        Returns True when the node's previous gateway is certainly gone (its runs may be taken at
        once), False when it may still be executing (take only runs whose lease ran out).
        """
        while True:
            taken = self._try_once(quiet=wait)
            if taken or not wait or (stop is not None and stop.is_set()):
                break
            time.sleep(poll_seconds)
        if not taken:
            raise StoreError(
                f"another gateway with node id {self.node_id!r} is running on store {self.db.shown_url}; "
                f"stop it or give this one another [engine] node_id"
            )
        return self._record_holder()

    def _try_once(self, *, quiet: bool) -> bool:
        try:
            taken = self._acquire_postgres() if self.db.backend.session_locks else self._acquire_sqlite()
        except (SQLAlchemyError, StoreError) as exc:
            self._drop_connection()
            if not quiet:
                raise StoreError(f"store {self.db.shown_url}: taking the node lock failed: {describe(exc)}") from exc
            log.log(logging.DEBUG if self._failing else logging.WARNING,
                    "node lock of %s: the store failed (%s); trying again every %.1f s",
                    self.node_id, describe(exc), RETRY_AFTER_STORE_ERROR_SECONDS)
            self._failing = True
            time.sleep(RETRY_AFTER_STORE_ERROR_SECONDS)
            return False
        if self._failing:
            log.warning("node lock of %s: the store answers again", self.node_id)
            self._failing = False
        return taken

    def _record_holder(self) -> bool:
        previous = self.nodes.take(self.node_id, self.owner, self.queues)
        if not self.db.backend.session_locks or previous is None or previous.owner == self.owner:
            return True
        server_started_at = self._server_started_at()
        certain = previous.lock_checked_at > server_started_at
        if not certain:
            log.warning(
                "node %s: its previous gateway %s may still be executing (the store restarted after it last "
                "saw its lock); its runs are taken over when their leases run out", self.node_id, previous.owner,
            )
        return certain

    def _server_started_at(self) -> float:
        row = self._conn.execute(text("SELECT EXTRACT(EPOCH FROM pg_postmaster_start_time())")).first()
        self._conn.commit()
        # The server's clock, read as the store clock reads it (the offset maps it to local time).
        return float(row[0])

    def _lock_path(self) -> Path | None:
        database = self.db.engine.url.database or ""
        if not database or database == ":memory:":
            return None
        digest = hashlib.sha256(self.node_id.encode()).hexdigest()[:12]
        return Path(f"{database}.gateway-{digest}.lock")

    def _acquire_sqlite(self) -> bool:
        path = self._lock_path()
        if path is None:
            return True
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the gateway's life
        if not try_lock(handle):
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.node_id} {self.owner} pid {os.getpid()}\n")
        handle.flush()
        self._file = handle
        return True

    def _acquire_postgres(self) -> bool:
        if self._conn is None:
            self._conn = self.db.engine.connect()
        taken = bool(self._conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}).scalar())
        self._conn.commit()
        return taken

    # ----- holding it -----------------------------------------------------------------------------
    def check(self) -> bool:
        """True while this process still holds the lock and the node's row names it.

        On PostgreSQL the lock is looked up on its own session: a session that ended (a server
        restart, a dropped connection) took the lock with it even though this process lives.
        """
        if self.db.backend.session_locks:
            try:
                held = self._conn is not None and bool(self._conn.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                        "AND granted AND classid = :class_id AND objid = :obj_id AND objsubid = 1"
                    ),
                    {"class_id": self._class_id, "obj_id": self._obj_id},
                ).scalar())
                if self._conn is not None:
                    self._conn.commit()
            except SQLAlchemyError as exc:
                log.warning("node lock of %s: its session failed: %s", self.node_id, describe(exc))
                held = False
            if not held:
                self._drop_connection()
                return False
        return self.nodes.touch(self.node_id, self.owner)

    def try_reacquire(self) -> bool:
        """After :meth:`check` failed: take the lock back if it is free and nobody else held it
        meanwhile (the node's row still names this process). False otherwise."""
        try:
            if not self._try_once(quiet=False):
                return False
            return self.nodes.touch(self.node_id, self.owner)
        except StoreError as exc:
            log.warning("node lock of %s: taking it back failed: %s", self.node_id, exc)
            return False

    def release(self) -> None:
        if self._file is not None:
            unlock(self._file)
            self._file.close()
            self._file = None
        self._drop_connection()  # ends the session, which releases the advisory lock

    def _drop_connection(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.close()
            except Exception:  # already broken
                log.debug("node lock of %s: closing its session failed", self.node_id, exc_info=True)
