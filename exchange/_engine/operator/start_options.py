"""The options of a start: the camelCase keywords every surface takes, and the typed value the engine uses.

The public API takes them as keywords, as the authoring API always has:
``workflows.start(name, params, queue=..., partitionKey=..., priority=..., deduplicationId=...,
timeoutSeconds=..., actor=...)`` (:class:`StartKeywords` types them for checkers). The runtime parses
them once, at its door (:meth:`~exchange._engine.operator.runtime.Runtime.start` and ``create_run``),
into a frozen :class:`StartOptions` with snake_case fields and units, and passes that inward.

Every refusal is :class:`~exchange.errors.InvalidParams` naming the option; nothing is stored then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from exchange._arguments import shown, text
from exchange.errors import InvalidParams

PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1  # an INTEGER column on both backends
# The text options and the size of the store column each one goes to, in the order they are checked.
_TEXT_OPTION_MAX_CHARS = {"queue": 100, "partitionKey": 200, "deduplicationId": 200, "actor": 200}


class StartKeywords(TypedDict, total=False):
    """The keywords of a start, as callers spell them (for signatures and type checkers only: an
    unknown or ill-typed one still arrives at run time and is refused by :meth:`StartOptions.parse`).
    A whole number is taken as its text for a text option (a line number as a partition key)."""

    queue: str | None
    partitionKey: str | int | None
    priority: int
    deduplicationId: str | int | None
    timeoutSeconds: float | None
    actor: str | None


# The keywords a start takes, in the order error messages list them.
START_OPTIONS: tuple[str, ...] = ("queue", "partitionKey", "priority", "deduplicationId", "timeoutSeconds", "actor")
assert set(START_OPTIONS) == set(StartKeywords.__annotations__)


def reject_unknown(keywords: Mapping[str, Any]) -> None:
    """InvalidParams naming every keyword that is not a start option (and listing the known ones)."""
    unknown = set(keywords) - set(START_OPTIONS)
    if unknown:
        raise InvalidParams(
            f"unknown start option(s) {', '.join(sorted(map(str, unknown)))} (known: {', '.join(START_OPTIONS)})"
        )


@dataclass(frozen=True, slots=True)
class StartOptions:
    """A start's options, checked; the fields as the run's row keeps them. None means "not given"
    (no partition key, no deduplication, no timeout); for ``queue`` and ``actor`` so does "", and
    the run gets the default (queue ``default``, the caller's
    :func:`~exchange._engine.operator.runtime.default_actor`)."""

    queue: str | None = None
    partition_key: str | None = None
    priority: int = 0
    deduplication_id: str | None = None
    timeout_seconds: float | None = None
    actor: str | None = None

    @classmethod
    def parse(cls, keywords: Mapping[str, Any]) -> StartOptions:
        """The options the camelCase ``keywords`` give; InvalidParams naming the first one that is
        unknown, or that the store cannot hold: a text option that is not a str (or a whole number)
        or is longer than its column, a ``timeoutSeconds`` that is not a finite number > 0, a
        ``priority`` that is not a whole number in a 32-bit INTEGER."""
        reject_unknown(keywords)
        texts: dict[str, str | None] = {}
        for key, max_chars in _TEXT_OPTION_MAX_CHARS.items():
            value = keywords.get(key)
            if value is not None:
                if isinstance(value, int) and not isinstance(value, bool):
                    value = str(value)  # a line number as a partition key, say
                value = text("start", key, value, max_chars=max_chars, empty=True, error=InvalidParams)
            texts[key] = value
        timeout = keywords.get("timeoutSeconds")
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
                math.isfinite(timeout) and timeout > 0
            ):
                raise InvalidParams(f"start: timeoutSeconds must be a positive finite number, got {shown(timeout)}")
            timeout = float(timeout)
        priority = keywords.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int) or not (
            PRIORITY_MIN <= priority <= PRIORITY_MAX
        ):
            raise InvalidParams(
                f"start: priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got {shown(priority)}"
            )
        return cls(
            queue=texts["queue"],
            partition_key=texts["partitionKey"],
            priority=priority,
            deduplication_id=texts["deduplicationId"],
            timeout_seconds=timeout,
            actor=texts["actor"],
        )
