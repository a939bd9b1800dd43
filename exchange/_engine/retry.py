"""Step retry options (DBOS semantics) and how a failure is classified.

``max_attempts`` counts every attempt, the first included. Retries happen only when
``retries_allowed`` is true; the delay before attempt n+1 is ``interval_seconds * backoff_rate**(n-1)``
unless the error carries ``retry_after``. :class:`FatalError` is never retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exchange.errors import ExchangeError, FatalError, RetryableError, WorkflowError

OPTION_KEYS = ("retries_allowed", "max_attempts", "interval_seconds", "backoff_rate")


def retryable(error: BaseException) -> bool:
    """FatalError never; Exchange's own errors only when they are RetryableError (a bad config or an
    unknown name will not fix itself); any other exception (a library's) yes."""
    if isinstance(error, FatalError):
        return False
    if isinstance(error, ExchangeError):
        return isinstance(error, RetryableError)
    return True


@dataclass(frozen=True)
class RetryPolicy:
    retries_allowed: bool = False
    max_attempts: int = 3
    interval_seconds: float = 1.0
    backoff_rate: float = 2.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None, where: str) -> RetryPolicy:
        """Validate a step's ``options`` dict; ``where`` names the step in errors."""
        if not options:
            return cls()
        unknown = set(options) - set(OPTION_KEYS)
        if unknown:
            raise WorkflowError(f"step {where}: unknown option(s) {', '.join(sorted(unknown))}")
        policy = cls(
            retries_allowed=bool(options.get("retries_allowed", cls.retries_allowed)),
            max_attempts=options.get("max_attempts", cls.max_attempts),
            interval_seconds=float(options.get("interval_seconds", cls.interval_seconds)),
            backoff_rate=float(options.get("backoff_rate", cls.backoff_rate)),
        )
        if not isinstance(policy.max_attempts, int) or policy.max_attempts < 1:
            raise WorkflowError(f"step {where}: max_attempts must be an integer >= 1")
        if policy.interval_seconds < 0 or policy.backoff_rate < 1:
            raise WorkflowError(f"step {where}: interval_seconds must be >= 0 and backoff_rate >= 1")
        return policy

    def delay_after(self, attempt: int, error: BaseException) -> float | None:
        """Seconds to wait before the next attempt after ``attempt`` failed, or None: give up."""
        if not self.retries_allowed or attempt >= self.max_attempts or not retryable(error):
            return None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after >= 0:
            return float(retry_after)
        return self.interval_seconds * (self.backoff_rate ** (attempt - 1))
