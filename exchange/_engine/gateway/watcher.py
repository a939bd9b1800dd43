"""One watcher per gateway for the mailboxes of every run it executes: waiting costs no store query.

A run waiting in ``recvCommand`` / ``recv`` sleeps on its context's event. The watcher learns that new
messages arrived and, for each run executing here, bumps the run's mail *generation* and sets the
event; the run then reads its mailbox once. While nothing arrives, a waiting run makes no query.

- PostgreSQL: sending a message notifies channel ``exchange_mailbox`` with the run id in the same
  transaction; the watcher LISTENs on a connection of its own (a look at the mailbox's highest id
  every :data:`FALLBACK_POLL_SECONDS` covers a reconnect).
- SQLite: one look for the whole gateway at the database's change counter (``PRAGMA data_version``
  on a connection of its own: it moves when any other connection commits); only when it moved, the
  mailbox's highest id, and only when that moved, which runs the new messages are for. On Linux the
  look is made when the database's files are written (inotify, :mod:`~exchange._store.gateways.file_changes`),
  and at least every :data:`FALLBACK_POLL_SECONDS`: a command from another process is seen when it
  is committed, and an idle gateway makes a few looks after each write (its lease renewal, once a
  second) instead of one every ``mailbox_poll_ms``. Elsewhere the look is made every
  ``mailbox_poll_ms``.

Messages sent in this process wake their run directly (:meth:`MailWatcher.notify`).

The same looks tell the gateway's periodic store queries (claiming enqueued runs, relaying cancel
requests) whether anything changed: :attr:`MailWatcher.changes` moves when the change counter moved
(SQLite) or a run was created or asked to cancel (PostgreSQL notifies :data:`RUNS_CHANGED`), and a
:class:`ChangeGate` skips a query while it has not moved — an idle gateway makes no query but this
watcher's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from exchange._store import RUNS_CHANGED, FileChanges, Store, sqlite_file_changes

log = logging.getLogger(__name__)

FALLBACK_POLL_SECONDS = 1.0
WRITE_VISIBLE_RETRY_SECONDS = 0.0005
WRITE_VISIBLE_WITHIN_SECONDS = 1.0
BUSY_LOOK_INTERVAL_SECONDS = 0.005
RETRY_SECONDS = 0.5


class MailWatcher:
    """``wake(run_id)`` is called for every run that has new mail (it ignores runs not executing here);
    ``wake_all()`` when the watcher cannot tell which runs got mail (a PostgreSQL listener that was
    reconnected: messages committed while nobody listened carry ids from a sequence, which commit in
    any order, so "ids above the last one seen" could miss one)."""

    def __init__(self, store: Store, wake: Callable[[str], None], poll_seconds: float,
                 wake_all: Callable[[], None] | None = None) -> None:
        self.store = store
        self._wake = wake
        self._wake_all = wake_all
        self._poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="exchange-mail-watcher", daemon=True)
        self._known_id = 0
        # The store's notices (PostgreSQL: LISTENing), or its change counter (SQLite), on a
        # connection of the watcher's own while open.
        self._feed = store.mailbox.feed()
        self._data_version: int | None = None
        self._file_changes: FileChanges | None = None
        self._looks = LookBudget(min(poll_seconds, BUSY_LOOK_INTERVAL_SECONDS))  # woken by a write
        self._later_looks = LookBudget(min(poll_seconds, BUSY_LOOK_INTERVAL_SECONDS))  # after one
        self._written = False  # the last wait ended on a write to the database's files
        self._last_write_at: float | None = None  # the last write whose commit a look may not have seen
        # Moves whenever the store may hold new enqueued runs or cancel requests (see ChangeGate).
        self.changes = 0
        # Called when PostgreSQL says runs were enqueued or asked to cancel (SQLite cannot tell).
        self.on_runs_changed: Callable[[], None] | None = None

    def start(self) -> None:
        self._known_id = self.store.mailbox.highest_id()
        if not self._feed.pushed:
            self._file_changes = sqlite_file_changes(self._feed.store_file())
        self._thread.start()

    @property
    def woken_by_writes(self) -> bool:
        """Whether SQLite looks wait for writes to the database (inotify) rather than a timer."""
        return self._file_changes is not None

    def stop(self) -> None:
        self._stop.set()
        if self._feed.pushed and self._thread.is_alive():
            self._interrupt_listen()
        if self._file_changes is not None:
            self._file_changes.interrupt()
        self._thread.join(2.0)
        self._close_listener()
        if self._file_changes is not None and not self._thread.is_alive():
            self._file_changes.close()
            self._file_changes = None

    def _interrupt_listen(self) -> None:
        """End the listener's wait now instead of at its next fallback poll (up to a second later):
        an empty notification, which wakes no run."""
        try:
            self._feed.interrupt()
        except Exception as exc:  # the store is down: the wait ends at its timeout anyway
            log.debug("mail watcher: could not interrupt the listener: %s", exc)

    def _run(self) -> None:
        postgres = self._feed.pushed  # else: one poll for all runs
        while not self._stop.is_set() and not self._feed.store_closed:
            try:
                if postgres:
                    self._listen()
                elif self._file_changes is not None:
                    self._look_when_written(self._file_changes)
                else:
                    self._poll_if_changed()
                    self._stop.wait(self._poll_seconds)
            except Exception as exc:  # StoreError, or the listening connection's own driver error
                log.warning("mail watcher: the store failed, retrying: %s", exc)
                self._close_listener()
                self._stop.wait(RETRY_SECONDS)

    def _poll(self) -> None:
        """Wake the runs that got messages since the last look (one query when nothing arrived)."""
        highest = self.store.mailbox.highest_id()
        if highest <= self._known_id:
            return
        for run_id in self.store.mailbox.runs_with_messages_after(self._known_id):
            self._wake(run_id)
        self._known_id = highest

    def _poll_if_changed(self) -> bool:
        """SQLite: :meth:`_poll` only when some connection committed since the last look; whether
        one had."""
        if not self._feed.is_open:
            self._feed.open()
            self._data_version = None
        version = self._feed.data_version()
        if version == self._data_version:
            return False
        self._data_version = version
        self.changes += 1
        self._poll()
        return True

    def _look_when_written(self, files: FileChanges) -> None:
        """SQLite on Linux: look now, then sleep until the database's files are written.

        A write is reported when the log is written, before its commit is visible (SQLite syncs the
        log first, ``synchronous=FULL``; a slow disk takes tens of ms), and one commit may be
        reported more than once. So a look right after a write may miss that write's commit, even
        when it finds another commit that became visible meanwhile (an earlier one, or one of this
        gateway's). After every write, looks follow whatever they find, at 0.5, 1.5, 4.5, 13.5 ...
        ms after it (each three times as late as the one before) for up to
        :data:`WRITE_VISIBLE_WITHIN_SECONDS`, and the next write starts them again: about eight
        looks per write, and a commit is seen within three times the time its sync took.
        Under a stream of commits (busy runs), a :class:`LookBudget` keeps the looks woken by writes
        to one per :data:`BUSY_LOOK_INTERVAL_SECONDS` (or ``mailbox_poll_ms`` if shorter), and
        another the looks that follow them; two budgets, so that the looks that follow a write do
        not delay the one the next write wakes (a command is still seen when it is committed).
        """
        self._poll_if_changed()
        now = time.monotonic()
        if self._written:
            self._last_write_at = now
        timeout_seconds = FALLBACK_POLL_SECONDS
        if self._last_write_at is not None:
            since = now - self._last_write_at
            if since >= WRITE_VISIBLE_WITHIN_SECONDS:
                self._last_write_at = None
            else:
                timeout_seconds = max(2 * since, WRITE_VISIBLE_RETRY_SECONDS)
        self._written = files.wait(timeout_seconds)
        if self._written:
            self._stop.wait(self._looks.delay_seconds())
        elif self._last_write_at is not None:
            self._stop.wait(self._later_looks.delay_seconds())

    def _listen(self) -> None:
        if not self._feed.is_open:
            self._feed.listen()
            self.changes += 1  # whatever changed while nobody listened
            self._poll()  # whatever arrived while nobody listened ...
            if self._wake_all is not None:
                self._wake_all()  # ... including below the highest id (see the class docstring)
        for payload in self._feed.notices(FALLBACK_POLL_SECONDS, stop_after=256):
            if self._stop.is_set():
                return
            if payload == RUNS_CHANGED:
                self.changes += 1
                if self.on_runs_changed is not None:
                    self.on_runs_changed()
            elif payload:
                self._wake(payload)
        self._poll()

    def _close_listener(self) -> None:
        self._feed.close()


class LookBudget:
    """How long to wait before the next look made because the store was written: none while looks
    are rare (a command is seen at once), one per ``interval_seconds`` under a steady stream of
    commits (busy runs), as polling would make. A token bucket of :data:`BURST` looks."""

    BURST = 4

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self._tokens = float(self.BURST)
        self._refilled_at = time.monotonic()

    def delay_seconds(self) -> float:
        """Take one look from the budget; the seconds to wait before making it."""
        if self.interval_seconds <= 0:
            return 0.0
        now = time.monotonic()
        self._tokens = min(float(self.BURST), self._tokens + (now - self._refilled_at) / self.interval_seconds)
        self._refilled_at = now
        self._tokens -= 1
        return max(0.0, -self._tokens * self.interval_seconds)


class ChangeGate:
    """Whether a periodic store query is worth making: only when the watcher saw a change since the
    last one, and at least every ``fallback_seconds`` whatever it saw (a notification lost during a
    reconnect, a watcher not running).

    Call :meth:`due` right before the query (it counts as made from then on, so a change that lands
    during the query makes the next one due) and :meth:`failed` when the query did not happen.
    """

    def __init__(self, watcher: MailWatcher, fallback_seconds: float) -> None:
        self._watcher = watcher
        self._fallback_seconds = fallback_seconds
        self._seen: int | None = None
        self._looked_at = 0.0

    def due(self) -> bool:
        changes = self._watcher.changes
        now = time.monotonic()
        if changes == self._seen and now - self._looked_at < self._fallback_seconds:
            return False
        self._seen, self._looked_at = changes, now
        return True

    def failed(self) -> None:
        self._seen = None
