"""A small bounded pool of raw DBAPI connections, shared by every thread of a process.

The reads that run often (a mailbox that was told it has mail, the store clock) take a connection for
one statement and give it back: a thousand runs share a handful of connections instead of holding one
each (PostgreSQL's default limit is 100 connections). No ping on checkout: a connection that fails
is discarded by the caller and replaced on demand.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)


class ConnectionPool:
    def __init__(self, connect: Callable[[], Any], size: int) -> None:
        self._connect = connect
        # A token per connection the pool may hold: the idle connection itself, or None for one not
        # open. A C queue: taking a token and giving it back costs no Python-level condition (a
        # BoundedSemaphore's took a reader a few dozen lines of Python on each side).
        self._tokens: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(size):
            self._tokens.put(None)
        self._broken: set[int] = set()
        self._lock = threading.Lock()  # _broken, _closed, and a token given back against a close
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection for the block (waits while all ``size`` are in use)."""
        conn = self._tokens.get()
        try:
            if conn is None:
                conn = self._connect()
            yield conn
        finally:
            self._give_back(conn)

    def _give_back(self, conn: Any) -> None:
        """The token of a block that ends: its connection, kept for the next one unless it broke or
        the pool closed (then closed here, and None given back)."""
        if conn is None:  # the connect failed
            self._tokens.put(None)
            return
        with self._lock:
            broken = id(conn) in self._broken
            self._broken.discard(id(conn))
            keep = not broken and not self._closed
            if keep:
                self._tokens.put(conn)
                return
            self._tokens.put(None)
        self._close(conn, broken=broken)

    def discard(self, conn: Any) -> None:
        """``conn`` failed: close it when the block ends instead of handing it out again."""
        with self._lock:
            self._broken.add(id(conn))

    def close(self) -> None:
        """Close the idle connections now and the others as their blocks end."""
        taken = []
        with self._lock:
            self._closed = True
            while True:
                try:
                    taken.append(self._tokens.get_nowait())
                except queue.Empty:
                    break
            for _ in taken:  # every token back, none of them a connection now
                self._tokens.put(None)
        idle = [conn for conn in taken if conn is not None]
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
