"""One gateway per node id and store: the lock that keeps two gateways from running one node's runs.

A restarted gateway takes back every unfinished run of its node at once (that is what makes recovery
fast), which is only safe if no other live gateway uses the same node id on the same store. SQLite
stores use an advisory file lock beside the database file; PostgreSQL stores use a session advisory
lock. Both are released by the operating system or the server when the process dies, kill -9 included.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import IO, Any

from sqlalchemy import text

from exchange.errors import StoreError
from exchange.workflows.store.database import Database


class NodeLock:
    def __init__(self, db: Database, node_id: str) -> None:
        self.db = db
        self.node_id = node_id
        self._file: IO[str] | None = None
        self._conn: Any = None  # PostgreSQL: the session that holds (or tries for) the lock
        self._held = False

    def acquire(self, *, wait: bool = False, poll_seconds: float = 0.01, stop: threading.Event | None = None) -> None:
        """Take the lock or raise StoreError naming the node id and the store.

        With ``wait`` (a standby gateway) keep trying every ``poll_seconds`` until the lock is free,
        which happens the moment the active gateway's process dies; ``stop`` ends the wait early
        (then StoreError as well).
        """
        while True:
            taken = self._acquire_sqlite() if self.db.is_sqlite else self._acquire_postgres()
            if taken or not wait or (stop is not None and stop.is_set()):
                break
            time.sleep(poll_seconds)
        if not taken:
            raise StoreError(
                f"another gateway with node id {self.node_id!r} is running on store {self.db.shown_url}; "
                f"stop it or give this one another [engine] node_id"
            )

    def _acquire_sqlite(self) -> bool:
        database = self.db.engine.url.database or ""
        if not database or database == ":memory:":
            return True
        digest = hashlib.sha256(self.node_id.encode()).hexdigest()[:12]
        path = Path(f"{database}.gateway-{digest}.lock")
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the gateway's life
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.node_id} pid {os.getpid()}\n")
        handle.flush()
        self._file = handle
        return True

    def _acquire_postgres(self) -> bool:
        key = int.from_bytes(hashlib.sha256(self.node_id.encode()).digest()[:8], "big", signed=True)
        if self._conn is None:
            self._conn = self.db.engine.connect()
        taken = bool(self._conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar())
        self._conn.commit()
        self._held = taken
        return taken

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        if self._conn is not None:
            self._conn.close()  # ends the session, which releases the advisory lock
            self._conn = None
            self._held = False
