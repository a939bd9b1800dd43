"""Small helpers shared by the tag and driver tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.01) -> T:
    """Return the first truthy ``predicate()``; AssertionError when ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout_s} s (last: {result!r})")
        time.sleep(interval_s)
