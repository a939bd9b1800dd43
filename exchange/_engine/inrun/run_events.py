"""``rt.setEvent(key, value)`` in a run: publish a value under ``key`` for readers of this run
(``getEvent``, ``getEventHistory``: :mod:`exchange._engine.inrun.run_reads`).

Not a recorded step: a replay publishes nothing again (the value, and its history event, were
written by the execution that first got there). Live, the run's quiet answers are made durable
first, since readers of the value may act on it.
"""

from __future__ import annotations

from exchange._engine.execution import RunContext


def set_event(ctx: RunContext, key: str, value_json: str) -> None:
    """Publish ``value_json`` (JSON text, checked by the caller) under ``key``, unless replaying."""
    if not ctx.replaying():
        ctx.make_answers_durable()  # readers of the value may act on it: a side effect
        ctx.store.values.set(ctx.fence, key, value_json)
