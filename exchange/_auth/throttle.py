"""Sign-in rate limiting: after ``max_failures`` failed attempts within ``window_seconds`` for one
key (a user name, a client address), that key is refused until the oldest failure leaves the window.

Kept in the gateway's memory: a restart forgets the count, which costs an attacker a gateway restart
per ``max_failures`` guesses, each also slowed by argon2's cost.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class SignInThrottle:
    def __init__(self, max_failures: int = 5, window_seconds: float = 300.0, max_keys: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self._max_keys = max_keys  # bounded memory however many names an attacker tries
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, *keys: str) -> float | None:
        """Seconds until one of ``keys`` may try again, or None when all may try now."""
        now = time.monotonic()
        waits: list[float] = []
        with self._lock:
            for key in keys:
                failures = self._recent(key, now)
                if len(failures) >= self.max_failures:
                    waits.append(failures[0] + self.window_seconds - now)
        return max(waits) if waits else None

    def failed(self, *keys: str) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._failures) >= self._max_keys:
                self._forget_oldest(now)
            for key in keys:
                self._failures.setdefault(key, deque(maxlen=self.max_failures)).append(now)

    def succeeded(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.get(key, deque())
        while failures and failures[0] <= now - self.window_seconds:
            failures.popleft()
        return failures

    def _forget_oldest(self, now: float) -> None:
        for key in [k for k, v in self._failures.items() if not v or v[-1] <= now - self.window_seconds]:
            del self._failures[key]
        while len(self._failures) >= self._max_keys:
            del self._failures[next(iter(self._failures))]
