"""Waiting on conditions with deadlines (never sleep-and-hope): the plant engineers' helper from
``simulators.testing``, with a longer default deadline for the engine's multi-process tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulators.testing import wait_until as _wait_until


def wait_until(
    predicate: Callable[[], Any], timeout_s: float = 10.0, interval_s: float = 0.01,
    message: str | Callable[[], str] = "",
) -> Any:
    """Return the first truthy value of ``predicate()``; AssertionError after ``timeout_s``."""
    return _wait_until(predicate, timeout_s, interval_s, message)


def holds_for(predicate: Callable[[], Any], seconds: float, interval_s: float = 0.05) -> bool:
    """Whether ``predicate()`` stays true for ``seconds``: for what must NOT happen (a drained gateway
    starting a run, a second command), where there is no event to wait for."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(interval_s)
    return True
