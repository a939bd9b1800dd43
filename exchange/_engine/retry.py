"""Step retry options (DBOS semantics) and how a failure is classified.

``max_attempts`` counts every attempt, the first included. Retries happen only when
``retries_allowed`` is true; the delay before attempt n+1 is ``interval_seconds * backoff_rate**(n-1)``
unless the error carries ``retry_after``. :class:`FatalError` is never retried.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from exchange._arguments import shown
from exchange.errors import ExchangeError, FatalError, RetryableError, WorkflowError


class StepOptions(TypedDict, total=False):
    """The ``options`` of ``@step(name, options={...})``; every key may be left out (the defaults
    of :class:`RetryPolicy`). :meth:`RetryPolicy.from_options` checks a dict against it when the
    step is declared and names the key that is wrong."""

    retries_allowed: bool
    max_attempts: int
    interval_seconds: float
    backoff_rate: float


OPTION_KEYS: tuple[str, ...] = tuple(StepOptions.__annotations__)
MAX_ATTEMPTS_LIMIT = 1_000_000  # far above any sensible policy; an int the store's column holds


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
        """Validate a step's ``options`` (see :class:`StepOptions`); ``where`` names the step.

        WorkflowError naming the step and the key: a key that is not an option, ``retries_allowed``
        that is not a bool, ``max_attempts`` that is not a whole number from 1 to
        :data:`MAX_ATTEMPTS_LIMIT`, ``interval_seconds`` that is not a finite number >= 0, or
        ``backoff_rate`` that is not a finite number >= 1."""
        if options is None:
            return cls()
        if not isinstance(options, Mapping):
            raise WorkflowError(f"step {where}: options must be a dict of {', '.join(OPTION_KEYS)}, "
                                f"got {shown(options)}")
        unknown = sorted(map(str, set(options) - set(OPTION_KEYS)))
        if unknown:
            raise WorkflowError(f"step {where}: unknown option(s) {', '.join(unknown)} "
                                f"(known: {', '.join(OPTION_KEYS)})")
        retries_allowed = options.get("retries_allowed", cls.retries_allowed)
        if not isinstance(retries_allowed, bool):  # "no" would be true
            raise WorkflowError(f"step {where}: retries_allowed must be True or False, got {shown(retries_allowed)}")
        max_attempts = options.get("max_attempts", cls.max_attempts)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not (
            1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise WorkflowError(f"step {where}: max_attempts must be an integer >= 1 and <= {MAX_ATTEMPTS_LIMIT}, "
                                f"got {shown(max_attempts)}")
        return cls(
            retries_allowed=retries_allowed,
            max_attempts=max_attempts,
            interval_seconds=_number(where, "interval_seconds", options.get("interval_seconds", cls.interval_seconds),
                                     minimum=0.0),
            backoff_rate=_number(where, "backoff_rate", options.get("backoff_rate", cls.backoff_rate), minimum=1.0),
        )

    def delay_after(self, attempt: int, error: BaseException) -> float | None:
        """Seconds to wait before the next attempt after ``attempt`` failed, or None: give up."""
        if not self.retries_allowed or attempt >= self.max_attempts or not retryable(error):
            return None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after >= 0:
            return float(retry_after)
        return self.interval_seconds * (self.backoff_rate ** (attempt - 1))


def _number(where: str, key: str, value: Any, *, minimum: float) -> float:
    """``value`` as a float if it is a finite number >= ``minimum`` (not a bool); WorkflowError
    naming the step and ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise WorkflowError(f"step {where}: {key} must be a finite number >= {minimum:g}, got {shown(value)}")
    return float(value)
