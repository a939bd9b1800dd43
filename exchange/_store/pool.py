"""A small bounded pool of raw DBAPI connections, shared by every thread of a process.

The reads that run often (a mailbox that was told it has mail, the store clock) take a connection for
one statement and give it back: a thousand runs share a handful of connections instead of holding one
each (PostgreSQL's default limit is 100 connections). No ping on checkout: a connection that fails
is discarded by the caller and replaced on demand.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)


class ConnectionPool:
    def __init__(self, connect: Callable[[], Any], size: int) -> None:
        self._connect = connect
        self._idle: list[Any] = []
        self._broken: set[int] = set()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection for the block (waits while all ``size`` are in use)."""
        self._slots.acquire()
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._connect()
            try:
                yield conn
            finally:
                with self._lock:
                    broken = id(conn) in self._broken
                    self._broken.discard(id(conn))
                    keep = not broken and not self._closed
                    if keep:
                        self._idle.append(conn)
                if not keep:
                    self._close(conn, broken=broken)
        finally:
            self._slots.release()

    def discard(self, conn: Any) -> None:
        """``conn`` failed: close it when the block ends instead of handing it out again."""
        with self._lock:
            self._broken.add(id(conn))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._close(conn, broken=False)

    @staticmethod
    def _close(conn: Any, *, broken: bool) -> None:
        close_connection(conn, broken=broken)


def close_connection(conn: Any, *, broken: bool) -> None:
    """Close a connection, never raising. A broken one is invalidated instead: closing it would first
    roll back on it and log that failure as an error."""
    try:
        invalidate = getattr(conn, "invalidate", None) if broken else None
        if invalidate is not None:
            invalidate()
        else:
            conn.close()
    except Exception:  # already broken
        log.debug("closing a connection failed", exc_info=True)


def close_cursor(cur: Any) -> None:
    """Close ``cur``, never raising: its connection may be closed already (a failed rollback)."""
    try:
        cur.close()
    except Exception as exc:  # the driver's "closed database" error: nothing left to free
        log.debug("closing a cursor failed: %s", exc)
