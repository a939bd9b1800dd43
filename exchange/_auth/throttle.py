"""Sign-in rate limiting, per user name *and* peer address.

Failures are counted for each pair (user, address), never for a user alone nor for an address
alone: someone guessing ``mallory``'s password locks out nobody else, not even ``op`` at the same
HMI, and addresses guessing ``op``'s password slow down only themselves, so ``op`` signs in at once
from any other address (the attack of many peers on one user is answered with delays for those
peers, not with a refusal of the right password).

The first :attr:`~SignInThrottle.free_failures` failures of a pair cost nothing; after that the
pair must wait before its next attempt is even checked: ``first_wait_seconds`` (5 s), doubling with
each further failure, up to ``max_wait_seconds`` (60 s). An attempt during the wait is refused
without looking at the password and does not lengthen it; a success clears the pair, and a pair
with no failure for ``forget_after_seconds`` (5 min) is forgotten. A single address therefore
gets about one guess a minute per user, as with the former five failures per five minutes, while
a person who mistyped five times waits seconds, not minutes.

:class:`SignInThrottle` is kept in the gateway's memory, shared by the HTTP API, the console and
the OPC UA server of one gateway process: a restart forgets the counts, which costs an attacker a
gateway restart per handful of guesses, each also slowed by argon2's cost. The command line
(``exchange verify``, ``sign``, ``release`` and the actions ``--user`` signs) is a new process at
each attempt, so :class:`StoredThrottle` keeps its counts in the store, under the client "the
command line", with the same policy and the store's clock: the next process finds them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exchange._store import AccountTable


@dataclass
class _Pair:
    failures: int
    last_failure: float
    wait_seconds: float  # before the next attempt may be checked, from last_failure


class SignInThrottle:
    def __init__(self, free_failures: int = 5, first_wait_seconds: float = 5.0, max_wait_seconds: float = 60.0,
                 forget_after_seconds: float = 300.0, max_pairs: int = 10_000) -> None:
        self.free_failures = free_failures
        self.first_wait_seconds = first_wait_seconds
        self.max_wait_seconds = max_wait_seconds
        self.forget_after_seconds = max(forget_after_seconds, max_wait_seconds)
        self._max_pairs = max_pairs  # bounded memory however many names and addresses an attacker tries
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(user: str, peer: str) -> tuple[str, str]:
        """The pair a sign-in counts under: names compare without case (``Op`` is ``op``)."""
        return user[:100].casefold(), peer

    def retry_after(self, user: str, peer: str) -> float | None:
        """Seconds until ``user`` may try again from ``peer``, or None when it may try now."""
        now = time.monotonic()
        with self._lock:
            pair = self._live(self.key(user, peer), now)
            if pair is None:
                return None
            remaining = pair.last_failure + pair.wait_seconds - now
        return remaining if remaining > 0 else None

    def failed(self, user: str, peer: str) -> float:
        """Count a failure of ``user`` from ``peer``; returns the wait it now has (0: none)."""
        now = time.monotonic()
        key = self.key(user, peer)
        with self._lock:
            pair = self._live(key, now)
            if pair is None:
                if len(self._pairs) >= self._max_pairs:
                    self._forget_oldest(now)
                pair = self._pairs[key] = _Pair(failures=0, last_failure=now, wait_seconds=0.0)
            pair.failures += 1
            pair.last_failure = now
            pair.wait_seconds = self.wait_for(pair.failures)
            return pair.wait_seconds

    def wait_for(self, failures: int) -> float:
        """The wait before the next attempt after ``failures`` failures in a row (0: none)."""
        beyond = failures - self.free_failures
        return 0.0 if beyond < 0 else min(self.max_wait_seconds, self.first_wait_seconds * 2.0 ** min(beyond, 30))

    def succeeded(self, user: str, peer: str) -> None:
        with self._lock:
            self._pairs.pop(self.key(user, peer), None)

    def _live(self, key: tuple[str, str], now: float) -> _Pair | None:
        pair = self._pairs.get(key)
        if pair is not None and now - pair.last_failure > self.forget_after_seconds:
            del self._pairs[key]
            return None
        return pair

    def _forget_oldest(self, now: float) -> None:
        for key in [k for k, p in self._pairs.items() if now - p.last_failure > self.forget_after_seconds]:
            del self._pairs[key]
        while len(self._pairs) >= self._max_pairs:  # oldest first: dicts keep insertion order
            del self._pairs[next(iter(self._pairs))]


SHARED = SignInThrottle()
"""The gateway process's one throttle: the API, the console and the OPC UA server count together."""


class StoredThrottle:
    """The policy of :class:`SignInThrottle` (``policy``), its counts in the store's
    ``exchange_sign_in_failures`` (``table``), timed by the store's clock: for processes that
    live for one attempt, the command line's."""

    def __init__(self, table: AccountTable, policy: SignInThrottle | None = None) -> None:
        self.table = table
        self.policy = policy or SignInThrottle()

    def retry_after(self, user: str, peer: str) -> float | None:
        """Seconds until ``user`` may try again from ``peer``, or None when it may try now."""
        key, client = self.policy.key(user, peer)
        row = self.table.sign_in_failure(key, client[:100])
        if row is None:
            return None
        remaining = row.last_failure_at + row.wait_seconds - self.table.now()
        return remaining if remaining > 0 else None

    def failed(self, user: str, peer: str) -> float:
        """Count a failure of ``user`` from ``peer``; returns the wait it now has (0: none)."""
        key, client = self.policy.key(user, peer)
        return self.table.count_sign_in_failure(key, client[:100], wait_for=self.policy.wait_for,
                                                forget_after_seconds=self.policy.forget_after_seconds)

    def succeeded(self, user: str, peer: str) -> None:
        key, client = self.policy.key(user, peer)
        self.table.clear_sign_in_failures(key, client[:100])
