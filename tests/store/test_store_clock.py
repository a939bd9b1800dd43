"""The store's clock read locally: a time another process recorded is never reached early."""

from __future__ import annotations

import time

from exchange._store.sql.clock import StoreClock

SKEW_SECONDS = 3600.0  # the store's clock runs an hour behind this machine's
LATE_SECONDS = 0.2  # the query reaches the store this long after it was sent, and comes back at once


def late_reading() -> float:
    time.sleep(LATE_SECONDS)
    return time.time() - SKEW_SECONDS


def test_a_measurement_that_reached_the_store_late_never_shortens_a_wait() -> None:
    clock = StoreClock(late_reading)
    clock.sync()
    assert clock.offset_seconds < -SKEW_SECONDS / 2  # the skew was measured, not taken for noise
    assert clock.uncertainty_seconds >= LATE_SECONDS / 2
    due = time.time() - SKEW_SECONDS + 1.0  # store time, one second from now
    # The midpoint puts the store's reading too early, so its clock reads ahead: the plain figure
    # comes out short by about half the round trip; a wait of seconds_until_passed ends after ``due``.
    short = clock.seconds_until(due)
    assert time.time() - SKEW_SECONDS + short < due - LATE_SECONDS / 4
    before = time.time()
    wait = clock.seconds_until_passed(due)
    assert before - SKEW_SECONDS + wait >= due


def test_an_offset_within_the_uncertainty_is_noise_and_the_local_clock_is_used_as_it_is() -> None:
    clock = StoreClock(time.time)
    assert clock.sync() == 0.0
    assert clock.offset_seconds == 0.0
