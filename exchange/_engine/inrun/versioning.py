"""Replay-safe time and code versions inside a run: ``rt.now()`` and ``rt.patched(patch_id)``.

``now`` is a recorded step (``exchange.now``): live, it records the store clock's time; replayed, it
answers what was recorded, so a workflow that branches on the time takes the same branch after a
crash.

``patched`` lets a workflow change under runs in flight (like Temporal's ``patched``)::

    if rt.patched("fill-check"):
        new path
    else:
        old path

Live, the call records a marker step (``exchange.patched:fill-check``) and answers True: the run
takes the new path, and every replay of it will. Replaying a history recorded by the old code (no
marker at this point: the old code went on with another step, an idle poll, or a sleep), it answers
False without recording anything, so the run goes on along the old path its history follows and
never meets a NonDeterminismError. The answer is kept for the rest of the execution: every later
call with the same ``patch_id`` answers the same. Once no run recorded before the patch is left, the
old path and the call can go (``exchange runs --code-version`` lists the runs of a code version).
"""

from __future__ import annotations

from datetime import UTC, datetime

from exchange._engine.execution import (
    PATCH_STEP_PREFIX,
    HistoryEnded,
    RunContext,
    advance,
    record_answer,
    replay_or_record,
    tail_is_here,
)

NOW_STEP = "exchange.now"


def now(ctx: RunContext) -> datetime:
    """The store clock's time, recorded (see the module docstring); UTC, timezone-aware."""
    ctx.require_workflow_body("now")
    seconds = replay_or_record(ctx, NOW_STEP, ctx.store.clock.now)
    return datetime.fromtimestamp(float(seconds), UTC)


def _history_goes_on_without_marker(ctx: RunContext, marker: str) -> bool | None:
    """At the current position: True when the recorded history goes on with something else than
    ``marker`` (the old code ran here), False when the marker is the next record, None when the
    history ends here (live)."""
    record = ctx.recorded.get(ctx.next_seq)
    if record is not None:
        return not (record.name == marker and ctx.quiet_count == record.skipped_ops)
    if tail_is_here(ctx) and ctx.quiet_ops is not None and (
        ctx.quiet_count < ctx.quiet_ops or (ctx.quiet_count == ctx.quiet_ops and ctx.quiet_wake_at is not None)
    ):
        return True  # idle polls or a sleep of the old code were recorded after this point
    return None


def patched(ctx: RunContext, patch_id: str) -> bool:
    """Whether this run takes the new code path of ``patch_id`` (see the module docstring)."""
    ctx.require_workflow_body("patched")
    decided = ctx.patches.get(patch_id)
    if decided is not None:
        return decided
    marker = PATCH_STEP_PREFIX + patch_id
    goes_on = _history_goes_on_without_marker(ctx, marker)
    if goes_on is None:
        if ctx.check_only:  # live, the run would record the marker: past the history
            raise HistoryEnded(ctx.next_seq, marker)
        record_answer(ctx, marker, True)
        decided = True
    elif goes_on:
        decided = False
    else:
        record = ctx.recorded[ctx.next_seq]
        advance(ctx, record.seq)
        decided = True
    ctx.patches[patch_id] = decided
    return decided
