"""``units.acquire`` in a run: ask for units, wait until they are granted, release them (recorded).

The request is a row of the store (:mod:`exchange._store.runs.units`), made once per call (a run
resumed while it waited finds its own request, in its place in the queue), on the units' lane
(:mod:`~exchange._engine.inrun.unit_lane`): not on the run's thread, which then waits. The wait is
:class:`~exchange._engine.inrun.unit_wait.UnitWait`, a mailbox wait: a thousand runs waiting on
units cost what waiting in ``recvCommand`` costs, a release on another gateway wakes the next holder
at once, and HOLD, RESUME, STOP and ABORT are taken as they come (a HOLD holds the run and takes its
request out of the granting without losing its place). A cancel ends it as it ends every wait (the
run's end releases what it held and cancels its waits).

What the run got is one recorded step (``units.acquire``): ``{"request", "units"}``, or
``{"timed_out": true}``, or ``{"stopped": command}``; a replay gives it back without asking again.
The release is a recorded step too (``units.release``, ``{"request", "released"}``); releasing is
idempotent, so a release cut off before its record is simply made again. A store that fails under
the request, the wait or the release is an outage, as in a step (StoreLost: the run is executed
again by replay once the store answers, and the release is made then), never the run's failure:
the run used to end ERROR, and a ``with`` block that ended in an outage released its units only
at that end.

A replayed grant whose ``with`` block had not ended (no ``units.release`` of its request recorded
after it) must hold its units before the block's body goes on. A run resumed after a crash or a
takeover still does; a run that ended released them (a retry executes it again), and a fork's
copy of the grant is its origin's. So such a grant is asked again, for the very units it recorded
(a replay must see what the run saw), at the acquire's own sequence number: the row there is made
WAITING anew (:meth:`~exchange._store.runs.units.UnitTable.request`: a request its run's end ended,
or none in a fork), and the run waits in order like any request before the block goes on. That wait
is durable as any (its row), honours HOLD and RESUME, has no timeout and takes no STOP (the recorded
path goes on past the grant); the units are released when the block ends or the run ends, as ever.
"""

from __future__ import annotations

from typing import Any

from exchange._engine.execution import RunContext, replay_or_record, store_guard
from exchange._engine.inrun.unit_lane import UNIT_LANE
from exchange._engine.inrun.unit_wait import UnitWait
from exchange._engine.model import commands
from exchange._store import UnitRequest, codec
from exchange.errors import UnitTimeout

ACQUIRE_STEP = "units.acquire"
RELEASE_STEP = "units.release"


@store_guard
def acquire_in_run(ctx: RunContext, wanted: list[str], any_of: bool, unit_class: str | None,
                   timeout_s: float | None) -> dict[str, Any]:
    """``{"request", "units"}`` once granted (the caller checked the arguments); UnitTimeout after
    ``timeout_s``, StopRequested / AbortRequested for a STOP / ABORT while waiting."""
    ctx.require_workflow_body(ACQUIRE_STEP)
    ctx.used_units = True
    seq = ctx.next_seq
    replayed = seq in ctx.recorded  # (else recorded now, or NonDeterminismError)
    recorded = replay_or_record(ctx, ACQUIRE_STEP, _ask_and_wait, ctx, wanted, any_of, unit_class, timeout_s)
    if isinstance(recorded, dict) and recorded.get("timed_out"):
        raise UnitTimeout(wanted if not any_of else [unit_class or ", ".join(wanted)], timeout_s or 0.0)
    if isinstance(recorded, dict) and "stopped" in recorded:
        raise commands.stop_error(recorded["stopped"])
    if replayed and not _block_ended(ctx, seq, recorded["request"]):
        return _hold_again(ctx, seq, recorded)
    return dict(recorded)


@store_guard
def units_held_in_run(ctx: RunContext) -> list[str]:
    """The units this run holds now (one query): what a step on a unit's equipment checks first."""
    return ctx.store.units.held_by(ctx.run_id)


@store_guard
def release_in_run(ctx: RunContext, request_id: int, why: str) -> bool:
    """Release what the request ``request_id`` of this run holds; whether it held anything."""
    ctx.require_workflow_body(RELEASE_STEP)
    recorded = replay_or_record(ctx, RELEASE_STEP, _release, ctx, request_id, why)
    return bool(recorded.get("released")) if isinstance(recorded, dict) else bool(recorded)


def _release(ctx: RunContext, request_id: int, why: str) -> dict[str, Any]:
    ctx.lease.await_valid()
    return {"request": request_id, "released": ctx.store.units.release(ctx.fence, request_id, why)}


def _ask_and_wait(ctx: RunContext, wanted: list[str], any_of: bool, unit_class: str | None,
                  timeout_s: float | None) -> Any:
    ctx.make_answers_durable()  # other runs act on the request: what this run received is durable first
    ctx.lease.await_valid()
    # Written on the units' lane, not on this thread, which then waits: see unit_lane.
    request = UNIT_LANE.call(ctx.store.units.request, ctx.fence, ctx.next_seq, wanted, any_of=any_of,
                             unit_class=unit_class)
    return UnitWait(ctx, request, step=ACQUIRE_STEP, timeout_s=timeout_s).run()


def _block_ended(ctx: RunContext, seq: int, request_id: Any) -> bool:
    """Whether the history records the release of the grant at ``seq`` (request ``request_id``)
    later on. A release recorded as a bare boolean (before releases named their request) closes the
    innermost grant still open: ``with`` blocks nest."""
    inner: list[Any] = []  # the grants opened after ours and not released yet, innermost last
    for later in range(seq + 1, ctx.frontier + 1):
        rec = ctx.recorded.get(later)
        if rec is None or rec.output is None or rec.name not in (ACQUIRE_STEP, RELEASE_STEP):
            continue
        output = codec.loads(rec.output)
        if rec.name == ACQUIRE_STEP:
            if isinstance(output, dict) and "request" in output:
                inner.append(output["request"])
        elif isinstance(output, dict):
            if output.get("request") == request_id:
                return True
            if output.get("request") in inner:
                inner.remove(output.get("request"))
        elif not inner:
            return True
        else:
            inner.pop()
    return False


def _hold_again(ctx: RunContext, seq: int, recorded: dict[str, Any]) -> dict[str, Any]:
    """The replayed grant at ``seq``, its units held by this run again (see the module docstring)."""
    units = list(recorded["units"])
    ctx.lease.await_valid()
    asked = UNIT_LANE.call(ctx.store.units.request, ctx.fence, seq, units)  # a read only while it holds them
    request = UnitWait(ctx, asked, step=ACQUIRE_STEP, timeout_s=None, may_end=False).run()
    assert isinstance(request, UnitRequest)  # a wait that may not end gives the request it got
    return {"request": request.id, "units": units}
