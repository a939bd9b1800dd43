"""``rt.writeStream(key, value)`` in a run: a recorded step (``exchange.writeStream``) that appends
``value`` to the run's stream ``key`` exactly once (see :mod:`exchange._store.runs.streams`);
a replay finds the step recorded and appends nothing."""

from __future__ import annotations

from typing import Any

from exchange._engine.execution import RunContext, replay_or_record

WRITE_STEP = "exchange.writeStream"


def write(ctx: RunContext, key: str, value_json: str) -> None:
    ctx.require_workflow_body("writeStream")
    replay_or_record(ctx, WRITE_STEP, _append, ctx, key, value_json)


def _append(ctx: RunContext, key: str, value_json: str) -> dict[str, Any]:
    ctx.make_answers_durable()  # readers act on the value: a side effect
    seq = ctx.next_seq  # the step's own: the append and its record share the position
    ctx.store.streams.append(ctx.fence, key, seq, value_json)
    return {"key": key, "seq": seq}
