"""``rt.writeStream(key, value)`` in a run: a recorded step (``exchange.writeStream``) that appends
``value`` to the run's stream ``key`` exactly once (see :mod:`exchange._store.runs.streams`);
a replay finds the step recorded and appends nothing."""

from __future__ import annotations

from exchange._engine.execution import replay
from exchange._engine.execution.context import RunContext
from exchange._engine.inrun.operations import record_answer

WRITE_STEP = "exchange.writeStream"


def write(ctx: RunContext, key: str, value_json: str) -> None:
    ctx.require_workflow_body("writeStream")
    placement = replay.place(ctx, WRITE_STEP, quiet_able=False)
    if placement.position is replay.Position.RECORDED:
        assert placement.record is not None
        replay.advance(ctx, placement.record.seq)
        return
    ctx.make_answers_durable()  # readers act on the value: a side effect
    seq = ctx.next_seq
    ctx.store.streams.append(ctx.fence, key, seq, value_json)
    record_answer(ctx, WRITE_STEP, {"key": key, "seq": seq})
