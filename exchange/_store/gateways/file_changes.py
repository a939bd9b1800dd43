"""Wait until a SQLite store's files are written, instead of looking at them on a timer.

Every commit to a SQLite database writes its file or its write-ahead log (``<db>-wal``), whichever
process makes it. On Linux, inotify reports those writes, so the gateway's mail watcher can sleep
until one happens: an idle gateway then makes no look at all, and a command sent by another process
is seen as soon as it is committed rather than at the next poll. Where inotify is missing (another
OS, no ``inotify_simple``, a file system that does not report changes, the per-user watch limit
reached), :func:`sqlite_file_changes` returns None and the caller keeps polling.

The watch is on the database's folder (the ``-wal`` file is created and deleted as connections come
and go), filtered to the database's own files. Writes to shared memory (``-shm``, mapped) raise no
event and are not needed: every commit also writes the log or the file.
"""

from __future__ import annotations

import logging
import os
import select
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_SUFFIXES = ("", "-wal", "-journal")


class FileChanges:
    """Writes to one SQLite database's files, as seen by inotify. Not thread-safe: one waiter."""

    def __init__(self, inotify: Any, mask: int, database: Path) -> None:
        self._inotify = inotify
        self._names = {database.name + suffix for suffix in _SUFFIXES}
        self._interrupt_read, self._interrupt_write = os.pipe()
        os.set_blocking(self._interrupt_write, False)
        inotify.add_watch(str(database.parent), mask)

    def wait(self, timeout_seconds: float) -> bool:
        """Block until the database's files were written since the last call, ``timeout_seconds``
        pass, or :meth:`interrupt` is called; True when a write was seen. Events already queued
        count: a write that lands between two calls is not missed."""
        readable, _, _ = select.select([self._inotify, self._interrupt_read], [], [], max(0.0, timeout_seconds))
        if self._interrupt_read in readable:
            os.read(self._interrupt_read, 4096)
        if self._inotify not in readable:
            return False
        return any(event.name in self._names for event in self._inotify.read(timeout=0))

    def interrupt(self) -> None:
        """End a :meth:`wait` in progress now (from any thread)."""
        try:
            os.write(self._interrupt_write, b"x")
        except BlockingIOError:  # already interrupted and not yet read
            pass

    def close(self) -> None:
        self._inotify.close()
        os.close(self._interrupt_read)
        os.close(self._interrupt_write)


def sqlite_file_changes(database: Path | None) -> FileChanges | None:
    """A :class:`FileChanges` for the SQLite file ``database``, or None where writes cannot be
    watched (the caller polls then; the reason is logged at debug level)."""
    if database is None:
        return None
    try:
        from inotify_simple import INotify, flags
    except (ImportError, OSError):  # not installed (it is Linux-only), or no inotify in this libc
        log.debug("no inotify: the SQLite store is polled")
        return None
    inotify = None
    try:
        inotify = INotify()
        mask = flags.MODIFY | flags.CREATE | flags.MOVED_TO | flags.DELETE
        return FileChanges(inotify, int(mask), database.resolve())
    except OSError as exc:  # ENOSPC: the watch limit; EACCES; a file system without inotify
        log.debug("cannot watch %s for writes (%s): the SQLite store is polled", database, exc)
        if inotify is not None:
            inotify.close()
        return None
