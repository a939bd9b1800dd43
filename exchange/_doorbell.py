"""A flag a run's thread waits on and any thread sets: :class:`threading.Event` made cheap to wait on.

A gateway holds a thread per executing run, and a plant's runs spend their lives in short timed waits
(an operator loop polls its mailbox for 0.2 s, then sleeps for a second). ``Event.wait`` goes through
a ``Condition``: it allocates a lock, queues it, and takes and gives back the condition's own lock
around the wait, every time. A :class:`Doorbell` is one lock held while the bell is silent: a wait is
one timed acquire of it, and ringing releases it. The saving is small beside the wake-up itself (the
OS's part, which ``bench/scale.py`` prints as the floor of a thread per run), but it is paid by every
waiting run on every loop. The group commit's waiting writers and the clients waiting on a run's end
use it too, which is why it lives at the package's root, below both the engine and the store.
"""

from __future__ import annotations

import threading

__all__ = ["Doorbell"]


class Doorbell:
    """Set once rung, until :meth:`clear`; :meth:`wait` returns as soon as it is rung.

    Safe to ring and clear from any thread and to wait on from several (each waiter that gets the
    lock hands it on to the next). The flag is the truth; the lock only carries the wake-up.
    """

    __slots__ = ("_silent", "_rung")

    def __init__(self) -> None:
        self._silent = threading.Lock()
        self._silent.acquire()  # held while the bell is silent
        self._rung = False

    def ring(self) -> None:
        """Set the bell and wake whoever waits on it."""
        self._rung = True
        try:
            self._silent.release()
        except RuntimeError:  # already released: rung before, not cleared since
            pass

    def clear(self) -> None:
        """Silence the bell; a ring after this wakes the next wait."""
        self._rung = False
        self._silent.acquire(blocking=False)
        # A ring between the two lines above may have had its release taken back by the acquire:
        # the flag still says rung, and every wait looks at the flag first.

    def is_set(self) -> bool:
        return self._rung

    def wait(self, timeout_seconds: float | None = None) -> bool:
        """Wait until the bell is rung or ``timeout_seconds`` passed (None: no limit); whether it is rung."""
        if self._rung:
            return True
        if timeout_seconds is None:
            got = self._silent.acquire()
        elif timeout_seconds <= 0:
            return self._rung
        else:
            got = self._silent.acquire(timeout=timeout_seconds)
        if got and self._rung:  # hand the wake-up on: the bell stays rung until cleared
            try:
                self._silent.release()
            except RuntimeError:  # a ring since our acquire released it already
                pass
        # Got it but not rung: a release left over from a ring that a clear() has since taken back;
        # keeping the lock makes the bell silent again, as the flag says.
        return self._rung
