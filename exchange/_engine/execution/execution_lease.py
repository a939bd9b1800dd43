"""An execution's hold on its run: the fence its writes carry and how long it may still act.

Two guards keep a run from executing in two places at once:

- the *fence* (owner and lease generation, see :class:`~exchange._store.records.Fence`) goes
  into every write the execution makes; once the run changed hands the store refuses them;
- the *local validity*: the store lets another gateway take the run once its lease has expired by the
  store's clock, and that happens without asking this process (paused, cut off from the store). So
  the execution counts its own deadline on the monotonic clock from the moment a renewal was *sent*
  — never later than the store's expiry — minus a safety margin, and starts no step body, consumes no
  message and waits no longer once it has passed.

A lease is lost for good (:meth:`Lease.lose`) when a renewal did not include the run, the node lock
was lost, or the gateway stops; every check then raises :class:`~exchange.errors.OwnershipLost`.

A lease that merely ran out locally (a renewal is late: an overloaded gateway, a slow store) stops
nothing by itself: a waiting run keeps waiting, and a step body about to start waits for the next
renewal (:meth:`Lease.await_valid`), up to a lease's length, before giving up. Its writes are fenced
by the store either way.
"""

from __future__ import annotations

import threading
import time

from exchange._store import Fence
from exchange.errors import OwnershipLost

# The share of the lease this process relies on: the rest absorbs clock-rate differences and the
# time a renewal takes to reach the store.
LOCAL_SHARE = 0.8


class Lease:
    def __init__(self, fence: Fence, lease_seconds: float, *, granted_at: float | None = None) -> None:
        """``granted_at``: the monotonic time the statement granting the lease was sent (default now)."""
        self.fence = fence
        self.created_at = time.monotonic()
        self._lease_seconds = lease_seconds
        self._valid_until = (time.monotonic() if granted_at is None else granted_at) + lease_seconds * LOCAL_SHARE
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting = 0  # threads in await_valid: a renewal of 1,000 leases notifies only those

    @classmethod
    def pending(cls, fence: Fence, lease_seconds: float) -> Lease:
        """A lease not yet valid in this process: the renewal in the execution's first write (or the
        next lease renewal) makes it so. Until then nothing may act on it."""
        return cls(fence, lease_seconds, granted_at=time.monotonic() - lease_seconds)

    @property
    def run_id(self) -> str:
        return self.fence.run_id

    @property
    def lost(self) -> str | None:
        """Why the lease is lost for good, or None."""
        return self._lost

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at monotonic time ``sent_at`` included this run."""
        with self._lock:
            self._valid_until = max(self._valid_until, sent_at + self._lease_seconds * LOCAL_SHARE)
            if self._waiting:
                self._changed.notify_all()

    def lose(self, why: str) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = why
            self._changed.notify_all()

    def remaining_seconds(self) -> float:
        return self._valid_until - time.monotonic()

    def check_not_lost(self) -> None:
        """Raise OwnershipLost if the lease is lost for good (waiting needs no more than this)."""
        if self._lost is not None:
            raise OwnershipLost(self.fence.run_id, self._lost)

    def await_valid(self, timeout_seconds: float | None = None) -> None:
        """Return once this execution may start a side effect: the lease is valid here. A late renewal
        is waited for, up to ``timeout_seconds`` (default: one lease); OwnershipLost if it is lost, or
        still not renewed then."""
        if self._lost is None and time.monotonic() < self._valid_until:
            return  # the common case, read without the lock: both fields are replaced whole
        limit = time.monotonic() + (self._lease_seconds if timeout_seconds is None else timeout_seconds)
        with self._lock:
            while True:
                if self._lost is not None:
                    raise OwnershipLost(self.fence.run_id, self._lost)
                now = time.monotonic()
                if now < self._valid_until:
                    return
                if now >= limit:
                    raise OwnershipLost(
                        self.fence.run_id,
                        "its lease was not renewed in time: the store did not answer, or this process was paused",
                    )
                self._waiting += 1
                try:
                    self._changed.wait(limit - now)
                finally:
                    self._waiting -= 1
