"""A gateway's own connection to the store for learning that mail arrived or runs changed, without
asking the mailbox each time: what the engine's mail watcher
(:mod:`exchange._engine.gateway.watcher`) looks through.

- Where the store pushes notices (PostgreSQL): :meth:`MailFeed.listen` LISTENs on a connection of
  the feed's own, and :meth:`MailFeed.notices` hands on what the senders notified at their commits.
- Elsewhere (SQLite): :meth:`MailFeed.data_version` reads, on the feed's own connection, the count
  of commits by any other connection that SQLite keeps per file; a look at the mailbox is due only
  when it moved. :meth:`MailFeed.store_file` names the file, whose writes can be watched.

One feed per watcher, used by one thread (its connection is its own); :meth:`MailFeed.interrupt`
may be called from any thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exchange._store.sql import RUNS_CHANGED, Database, Statement, close_connection, sqlite_file

__all__ = ["RUNS_CHANGED", "MailFeed"]


class MailFeed:
    """See the module docstring. Every method that reaches the store raises the driver's error or
    StoreError when it cannot; the caller then :meth:`close` s the feed and tries again later."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = db.sql.mail
        self._conn: Any = None  # the feed's own DBAPI connection: LISTENing, or reading data_version

    @property
    def pushed(self) -> bool:
        """Whether the store pushes notices (PostgreSQL): :meth:`listen` and :meth:`notices`, else
        :meth:`data_version`."""
        return self._sql.pushes_notices

    @property
    def store_closed(self) -> bool:
        """The store was closed: the feed can never reach it again."""
        return self.db.closed

    @property
    def is_open(self) -> bool:
        """Whether the feed holds its connection (from :meth:`open` or :meth:`listen` until :meth:`close`)."""
        return self._conn is not None

    def store_file(self) -> Path | None:
        """The file a SQLite store lives in, whose writes a watcher may wait for; None for other stores
        (and for in-memory and ``file:`` URI databases)."""
        return sqlite_file(self.db.engine.url)

    def open(self) -> None:
        """Open the feed's own connection (autocommit, never pooled)."""
        self._conn = self.db.dedicated_connection()

    def listen(self) -> None:
        """Open the feed's connection and LISTEN on it (where :attr:`pushed`): from now on
        :meth:`notices` hands on every notice committed."""
        self.open()
        self._run(self._sql.listen_mail)

    def notices(self, timeout_seconds: float, stop_after: int) -> Iterator[str]:
        """The payloads notified since the last call, as they come, for up to ``timeout_seconds``
        or ``stop_after`` notices: a run id (that run has mail), :data:`RUNS_CHANGED` (a run was
        created, enqueued or asked to cancel, or a setting changed), or ``""`` (nothing: see
        :meth:`interrupt`)."""
        for notice in self._conn.dbapi_connection.notifies(timeout=timeout_seconds, stop_after=stop_after):
            yield str(notice.payload)

    def interrupt(self) -> None:
        """Where :attr:`pushed`: end a wait in :meth:`notices` now (an empty notice, which names
        no run), from any thread. A query on a pooled connection, not the feed's own."""
        notify = self._sql.notify_mail
        if notify is not None:
            self.db.query(notify, {"payload": ""})

    def data_version(self) -> int:
        """SQLite: the count of commits by other connections, read on the feed's own connection
        (:meth:`open` first); it moves when any other connection committed."""
        return int(self._run(self._sql.data_version)[0][0])

    def close(self) -> None:
        """Close the feed's connection, if open (as broken: a LISTENing session is never reused)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            close_connection(conn, broken=True)

    def _run(self, statement: Statement) -> list[Any]:
        """Rows of ``statement`` run on the feed's own connection."""
        cur = self._conn.cursor()
        try:
            statement.run(cur, {})
            return list(cur.fetchall()) if cur.description is not None else []
        finally:
            cur.close()
