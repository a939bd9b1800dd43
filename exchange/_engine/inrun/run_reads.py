"""A run reading what other runs publish: ``getEvent``, ``getEventHistory`` and ``readStream``
called in a workflow body (inside a step, or outside a run, they read plainly: a step's output is
recorded whole).

What a run reads there steers it as much as a received message does, so the answer is recorded and
a replay gives it back instead of reading again (the other run may have published more since). An
empty answer (no value yet, nothing new in the stream) is a quiet operation, like a ``recv`` that got
nothing: it leaves no step row, so a loop that polls another run's stream for hours stays small.

``getEvent`` with a timeout waits by looking at the store every :data:`~exchange._engine.
children.WAIT_POLL_SECONDS` (another run's values ring no bell here); a cancel, a lost lease or a
gateway stop ends the wait at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from exchange._engine.execution import QUIET, RunContext, replay_or_record, waitpoints
from exchange._engine.inrun.children import WAIT_POLL_SECONDS
from exchange._engine.operator import Runtime
from exchange._store import VALUE_EVENT, codec
from exchange._timefmt import iso_utc

GET_EVENT_STEP = "exchange.getEvent"
EVENT_HISTORY_STEP = "exchange.getEventHistory"
READ_STREAM_STEP = "exchange.readStream"


def recorded_read(ctx: RunContext, name: str, read: Callable[[], Any], empty: Any) -> Any:
    """The recorded answer of the read ``name`` at this position, or ``read()`` now, recorded; an
    answer equal to ``empty`` is quiet (no row) and a replay answers ``empty`` for it."""
    return replay_or_record(ctx, name, _read_or_quiet, read, empty, quiet_answer=empty)


def _read_or_quiet(read: Callable[[], Any], empty: Any) -> Any:
    answer = read()
    return QUIET if answer == empty else answer


def get_event(ctx: RunContext, run_id: str, key: str, timeout_seconds: float) -> Any:
    """The value ``run_id`` published under ``key``, waiting up to ``timeout_seconds`` for one;
    None when none came in time. Recorded (see the module docstring)."""
    what = f"event:{run_id}/{key}"

    def look() -> Any:
        ctx.flush_progress_if_due(timeout_seconds)
        deadline = time.monotonic() + timeout_seconds
        while True:
            ctx.check_cancelled()
            waitpoints.reached(waitpoints.READ, ctx.run_id, what)
            text = ctx.store.values.get(run_id, key)
            if text is not None:
                return codec.loads(text)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            waitpoints.reached(waitpoints.SLEEP, ctx.run_id, what)
            ctx.sleep(min(WAIT_POLL_SECONDS, remaining))

    return recorded_read(ctx, GET_EVENT_STEP, look, None)


def read_stream(runtime: Runtime, ctx: RunContext | None, run_id: str, key: str, after: int,
                limit: int) -> list[dict[str, Any]]:
    """The values of run ``run_id``'s stream ``key`` with ``seq`` above ``after`` (at most
    ``limit``), oldest first; recorded when ``ctx`` (the run whose workflow body reads) is given."""

    def read() -> list[dict[str, Any]]:
        return runtime.store.streams.read(run_id, key, after, limit)

    return read() if ctx is None else list(recorded_read(ctx, READ_STREAM_STEP, read, []))


def event_history(runtime: Runtime, ctx: RunContext | None, run_id: str, key: str,
                  limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` values run ``run_id`` published under ``key``, oldest first, as
    ``{"at", "value"}``; recorded when ``ctx`` (the run whose workflow body reads) is given."""

    def history() -> list[dict[str, Any]]:
        values = [{"at": iso_utc(e.at), "value": payload["value"]}
                  for e in runtime.store.lookup.events_of_kind(run_id, VALUE_EVENT)
                  if isinstance(payload := codec.loads(e.payload), dict) and payload.get("key") == key]
        return values[-limit:]

    return history() if ctx is None else list(recorded_read(ctx, EVENT_HISTORY_STEP, history, []))
