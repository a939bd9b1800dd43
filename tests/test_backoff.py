"""The one reconnect/retry backoff: doubling from the first delay to the ceiling, reset on success."""

from __future__ import annotations

import pytest

from exchange._backoff import Backoff


def test_delays_double_up_to_the_ceiling_and_reset_starts_over() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.next_s() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.next_s() == 0.1


def test_from_milliseconds_as_device_settings_give_them() -> None:
    backoff = Backoff.from_ms(100, 5000)
    assert (backoff.first_s, backoff.max_s) == (0.1, 5.0)


@pytest.mark.parametrize(("first_s", "max_s"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_bounds_that_would_busy_loop_or_shrink_are_refused(first_s: float, max_s: float) -> None:
    with pytest.raises(ValueError, match="0 < first_s <= max_s"):
        Backoff(first_s, max_s)
