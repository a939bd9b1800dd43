"""Step retry options (DBOS semantics) and how a failure is classified.

``max_attempts`` counts every attempt, the first included. Retries happen only when
``retries_allowed`` is true; the delay before attempt n+1 is ``interval_seconds * backoff_rate**(n-1)``
unless the error carries ``retry_after`` (a server's Retry-After): then it is exactly that, and a
``retry_after`` longer than ``retry_after_max_seconds`` ends the retries instead (a retry never goes
out before the time the error asked for). :class:`FatalError` is never retried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from exchange._arguments import shown
from exchange.errors import ExchangeError, FatalError, RetryableError, WorkflowError


class StepOptions(TypedDict, total=False):
    """The ``options`` of ``@step(name, options={...})``; every key may be left out (the defaults
    of :class:`RetryPolicy`). :meth:`RetryPolicy.from_options` checks a dict against it when the
    step is declared and names the key that is wrong. Steps of the step library that take retry
    options per call (``http.request``, ``db.*``) take these keys as keyword arguments."""

    retries_allowed: bool
    max_attempts: int
    interval_seconds: float
    backoff_rate: float
    retry_after_max_seconds: float


OPTION_KEYS: tuple[str, ...] = tuple(StepOptions.__annotations__)
MAX_ATTEMPTS_LIMIT = 1_000_000  # far above any sensible policy; an int the store's column holds
RETRY_AFTER_MAX_SECONDS = 3600.0  # the default: a service asking for more than an hour is not coming back soon


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
    retry_after_max_seconds: float = RETRY_AFTER_MAX_SECONDS

    @classmethod
    def from_options(
        cls,
        options: Mapping[str, Any] | None,
        where: str,
        *,
        base: RetryPolicy | None = None,
        error: Callable[[str], Exception] = WorkflowError,
    ) -> RetryPolicy:
        """Validate a step's ``options`` (see :class:`StepOptions`); ``where`` names the step.

        Keys left out keep ``base``'s values (default: the class defaults). ``error`` (WorkflowError
        at a declaration; a step's InvalidArgument for options given per call) names the step and the
        key: a key that is not an option, ``retries_allowed`` that is not a bool, ``max_attempts``
        that is not a whole number from 1 to :data:`MAX_ATTEMPTS_LIMIT`, ``interval_seconds`` or
        ``retry_after_max_seconds`` that is not a finite number >= 0, or ``backoff_rate`` that is not
        a finite number >= 1."""
        start = base if base is not None else cls()
        if options is None:
            return start
        if not isinstance(options, Mapping):
            raise error(f"step {where}: options must be a dict of {', '.join(OPTION_KEYS)}, got {shown(options)}")
        unknown = sorted(map(str, set(options) - set(OPTION_KEYS)))
        if unknown:
            raise error(f"step {where}: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTION_KEYS)})")
        merged = {**asdict(start), **options}
        retries_allowed = merged["retries_allowed"]
        if not isinstance(retries_allowed, bool):  # "no" would be true
            raise error(f"step {where}: retries_allowed must be True or False, got {shown(retries_allowed)}")
        max_attempts = merged["max_attempts"]
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not (
            1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise error(f"step {where}: max_attempts must be an integer >= 1 and <= {MAX_ATTEMPTS_LIMIT}, "
                        f"got {shown(max_attempts)}")

        def number(key: str, minimum: float) -> float:
            return _number(where, key, merged[key], minimum=minimum, error=error)

        return cls(
            retries_allowed=retries_allowed,
            max_attempts=max_attempts,
            interval_seconds=number("interval_seconds", 0.0),
            backoff_rate=number("backoff_rate", 1.0),
            retry_after_max_seconds=number("retry_after_max_seconds", 0.0),
        )

    def delay_after(self, attempt: int, error: BaseException) -> float | None:
        """Seconds to wait before the next attempt after ``attempt`` failed, or None: give up (no
        retries, the attempts used up, an error that is not retried, or a ``retry_after`` longer
        than :attr:`retry_after_max_seconds`: waiting less would retry before the time asked for)."""
        if not self.retries_allowed or attempt >= self.max_attempts or not retryable(error):
            return None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool) and retry_after >= 0:
            return float(retry_after) if retry_after <= self.retry_after_max_seconds else None
        return self.interval_seconds * (self.backoff_rate ** (attempt - 1))


def _number(where: str, key: str, value: Any, *, minimum: float, error: Callable[[str], Exception]) -> float:
    """``value`` as a float if it is a finite number >= ``minimum`` (not a bool); ``error`` naming
    the step and ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise error(f"step {where}: {key} must be a finite number >= {minimum:g}, got {shown(value)}")
    return float(value)
