"""``units.acquire`` in a run: ask for units, wait until they are granted, release them (recorded).

The request is a row of the store (:mod:`exchange._store.runs.units`), made once per call (a run
resumed while it waited finds its own request, in its place in the queue). A grant is a mailbox
message committed with the grant, so the wait is a mailbox wait
(:func:`~exchange._engine.execution.mail.wait_for_mail`): a thousand runs waiting on units cost what
waiting in ``recvCommand`` costs, and a release on another gateway wakes the next holder at once.
The same wait looks for a STOP or an ABORT (other commands stay for the next ``recvCommand``); a
cancel ends it as it ends every wait (the run's end releases what it held and cancels its waits).

What the run got is one recorded step (``units.acquire``): ``{"request", "units"}``, or
``{"timed_out": true}``, or ``{"stopped": command}``; a replay gives it back without asking again.
The release is a recorded step too (``units.release``); releasing is idempotent, so a release cut off
before its record is simply made again.
"""

from __future__ import annotations

from typing import Any

from exchange._engine.execution import MailLook, Receipt, RunContext, replay_or_record, wait_for_mail
from exchange._engine.inrun.operator_prompts import ends_in_stop, take_stop
from exchange._engine.model import commands
from exchange._store import GRANT_TOPIC, MessageRecord, UnitRequest, codec
from exchange.errors import UnitTimeout

ACQUIRE_STEP = "units.acquire"
RELEASE_STEP = "units.release"
STOP_LOOK_LIMIT = 1000
IDLE_WAIT_SECONDS = 3600.0  # one wait without timeout; a grant or a stop ends it at once
GRANTED = "GRANTED"


def acquire_in_run(ctx: RunContext, wanted: list[str], any_of: bool, unit_class: str | None,
                   timeout_s: float | None) -> dict[str, Any]:
    """``{"request", "units"}`` once granted (the caller checked the arguments); UnitTimeout after
    ``timeout_s``, StopRequested / AbortRequested for a STOP / ABORT while waiting."""
    ctx.require_workflow_body(ACQUIRE_STEP)
    ctx.used_units = True
    recorded = replay_or_record(ctx, ACQUIRE_STEP, _ask_and_wait, ctx, wanted, any_of, unit_class, timeout_s)
    if isinstance(recorded, dict) and recorded.get("timed_out"):
        raise UnitTimeout(wanted if not any_of else [unit_class or ", ".join(wanted)], timeout_s or 0.0)
    if isinstance(recorded, dict) and "stopped" in recorded:
        raise commands.stop_error(recorded["stopped"])
    return dict(recorded)


def units_held_in_run(ctx: RunContext) -> list[str]:
    """The units this run holds now (one query): what a step on a unit's equipment checks first."""
    return ctx.store.units.held_by(ctx.run_id)


def release_in_run(ctx: RunContext, request_id: int, why: str) -> bool:
    """Release what the request ``request_id`` of this run holds; whether it held anything."""
    ctx.require_workflow_body(RELEASE_STEP)
    return bool(replay_or_record(ctx, RELEASE_STEP, _release, ctx, request_id, why))


def _release(ctx: RunContext, request_id: int, why: str) -> bool:
    ctx.lease.await_valid()
    return ctx.store.units.release(ctx.fence, request_id, why)


def _ask_and_wait(ctx: RunContext, wanted: list[str], any_of: bool, unit_class: str | None,
                  timeout_s: float | None) -> Receipt:
    ctx.make_answers_durable()  # other runs act on the request: what this run received is durable first
    ctx.lease.await_valid()
    request = ctx.store.units.request(ctx.fence, ctx.next_seq, wanted, any_of=any_of, unit_class=unit_class)
    deadline = None if timeout_s is None else request.requested_at + timeout_s
    request_id = request.id
    grant = MailLook(GRANT_TOPIC, 10, wanted=lambda found: bool(_grants_of(found, request_id)),
                     note=f"{ACQUIRE_STEP}: grant")
    stop = MailLook(commands.COMMAND_TOPIC, STOP_LOOK_LIMIT, wanted=ends_in_stop, note=f"{ACQUIRE_STEP}: stop")
    waiting_for = " or ".join(wanted) if any_of else " and ".join(wanted)
    ctx.set_progress(f"waiting for unit {waiting_for}", {"waiting_for_units": wanted})
    ctx.flush_progress_if_due(IDLE_WAIT_SECONDS)
    while True:
        if request.status == GRANTED:
            return _granted(ctx, request)
        if request.status != "WAITING":  # ended by the run's end elsewhere (a cancel): the cancel is raised
            ctx.check_cancelled()
            return Receipt({"timed_out": True})
        wait_seconds = IDLE_WAIT_SECONDS
        if deadline is not None:
            wait_seconds = min(wait_seconds, max(0.0, ctx.store.clock.seconds_until(deadline)))
        got = wait_for_mail(ctx, [grant, stop], wait_seconds)
        if got is None:
            if deadline is not None and ctx.store.clock.seconds_until(deadline) <= 0:
                if ctx.store.units.cancel(ctx.fence, request.id, f"not granted within {timeout_s:g} s"):
                    return Receipt({"timed_out": True})
            request = _fresh(ctx, request)  # granted meanwhile: its message is taken below
            continue
        look, found = got
        if look is grant:  # committed with the grant: the answer is in hand, nothing more to read
            messages = _grants_of(found, request_id)
            units = codec.loads(messages[0].payload)["units"]
            return Receipt({"request": request_id, "units": list(units)}, messages)
        ending = commands.stop_or_abort_among(commands.Command.parse(m) for m in found)
        if ctx.store.units.cancel(ctx.fence, request.id, f"{ending} received while the run waited"):
            return take_stop(ctx, found, "a wait for units")
        request = _fresh(ctx, request)  # granted first: the STOP stays for the workflow's next receive


def _fresh(ctx: RunContext, request: UnitRequest) -> UnitRequest:
    found = ctx.store.units.get(ctx.run_id, request.seq)
    assert found is not None  # the run's own request
    return found


def _grants_of(found: list[MessageRecord], request_id: int) -> list[MessageRecord]:
    """The grant messages of request ``request_id`` among ``found`` (another request's, left by an
    earlier acquire of the run, are not this wait's)."""
    return [m for m in found if codec.loads(m.payload).get("request") == request_id]


def _granted(ctx: RunContext, request: UnitRequest) -> Receipt:
    """The grant, recorded with the consumption of its message(s)."""
    messages = _grants_of(ctx.store.mailbox.pending(ctx.run_id, GRANT_TOPIC, 100), request.id)
    return Receipt({"request": request.id, "units": list(request.granted or [])}, messages)
