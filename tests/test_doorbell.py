"""The run's wait primitive: a ring from another thread ends a wait at once, the bell stays rung
until cleared, a ring left over from before a clear never ends a later wait early."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from exchange._doorbell import Doorbell


def test_a_silent_bell_waits_out_its_timeout() -> None:
    bell = Doorbell()
    started = time.monotonic()
    assert bell.wait(0.05) is False
    assert time.monotonic() - started >= 0.05
    assert bell.wait(0) is False and not bell.is_set()


def test_a_ring_from_another_thread_ends_a_long_wait_at_once() -> None:
    bell = Doorbell()
    woke: list[float] = []
    waiter = threading.Thread(target=lambda: woke.append(time.monotonic()) if bell.wait(30) else None)
    waiter.start()
    time.sleep(0.05)  # let it block; the ring must reach a waiter already asleep
    rung_at = time.monotonic()
    bell.ring()
    waiter.join(5)
    assert not waiter.is_alive() and woke, "the ring did not end the wait"
    assert woke[0] - rung_at < 1.0


def test_the_bell_stays_rung_for_every_wait_until_cleared() -> None:
    bell = Doorbell()
    bell.ring()
    bell.ring()  # twice: still one state, no error
    for _ in range(3):
        assert bell.wait(5) is True
    assert bell.is_set()
    bell.clear()
    assert not bell.is_set()
    assert bell.wait(0.01) is False
    bell.clear()  # clearing a silent bell changes nothing
    assert bell.wait(0.01) is False


def run_threads(targets: list[Callable[[], object]], meanwhile: Callable[[], object]) -> None:
    """Start a thread per target, call ``meanwhile()``, then join them all."""
    threads = [threading.Thread(target=target) for target in targets]
    for t in threads:
        t.start()
    meanwhile()
    for t in threads:
        t.join(5)


def test_every_waiter_wakes_on_one_ring() -> None:
    bell = Doorbell()
    results: list[bool] = []

    def ring_soon() -> None:
        time.sleep(0.05)
        bell.ring()

    run_threads([lambda: results.append(bell.wait(30))] * 5, ring_soon)
    assert results == [True] * 5


def test_rings_and_clears_racing_leave_the_lock_in_step_with_the_flag() -> None:
    """After any interleaving of ring/clear from other threads, a final clear makes the bell silent
    (a wait times out) and a final ring makes it rung (a wait returns at once)."""
    bell = Doorbell()
    stop = threading.Event()

    def ringer() -> None:
        while not stop.is_set():
            bell.ring()

    def clearer() -> None:
        while not stop.is_set():
            bell.clear()

    def waiter() -> None:
        while not stop.is_set():
            bell.wait(0.001)

    def race_a_while() -> None:
        time.sleep(0.3)
        stop.set()

    run_threads([ringer, clearer, waiter, waiter], race_a_while)
    bell.clear()
    for _ in range(3):  # a release left over from the race may end one wait; it must not stay
        bell.wait(0.01)
    assert bell.wait(0.05) is False and not bell.is_set()
    bell.ring()
    assert bell.wait(5) is True
