"""Hold on a step's failure: ``@workflow(on_step_error="hold")``.

A step that fails after its retries does not raise into the workflow. In one commit its row becomes
HELD (HELD_IN_DOUBT when the failure left a tag write in doubt) with its error, and the run's state
HELD with a ``step_held`` event. The run then waits on its command topic as cheaply as
``recvCommand`` (the gateway's mail watcher wakes it) and takes the commands the ISA-88 table
accepts in HELD:

- RESUME: in one commit the command is consumed, the row becomes a fresh start (RETRYING with no
  attempt made, or STARTED when a write is in doubt, so the next attempt runs "resumed in doubt"
  and the tag's ``on_doubt`` decides) and the state RUNNING; the step runs again from attempt 1
  under its retry policy, and holds again if it fails again.
- STOP or ABORT: in one commit the command is consumed, the row becomes the step's ERROR outcome
  and the state STOPPED (ABORTED for an ABORT); the step's error is raised into the workflow, which
  may clean up.
- HOLD and RESET (not accepted in HELD), and a RESUME sent before the step was held (it was sent
  while the run was running, where RESUME is dropped too): dropped with a ``command_dropped``
  event, consumed in a commit that re-records the held row.
- A cancel ends the run CANCELLED; the row stays HELD.

Who did it: the ``step_held`` event and the HELD state are recorded with the run's actor and
``caused_by: "exchange"`` (Exchange held the run, not the person who created it); the state a
RESUME, a STOP or an ABORT leaves, with ``caused_by`` the command's sender and ``cause`` ``{"cmd",
"message_id"}`` (the ``command`` event itself has the sender as its actor).

Everything stays within the step's own sequence number: a replay after a crash or a takeover finds
the HELD row and waits again without executing the step, or finds the row the command left and takes
the same branch (a fresh attempt, or the recorded error raised).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from exchange._engine.execution.context import RunContext, StepCall
from exchange._engine.execution.mail import MailLook, wait_for_mail
from exchange._engine.model import HeldOnView, commands
from exchange._store import (
    STEP_ERROR,
    STEP_HELD,
    STEP_HELD_IN_DOUBT,
    STEP_RETRYING,
    STEP_STARTED,
    MessageRecord,
    NewEvent,
    StepRecord,
)
from exchange._timefmt import iso_utc
from exchange.errors import WorkflowError, WriteInDoubt

log = logging.getLogger(__name__)
T = TypeVar("T")

RAISE = "raise"
HOLD = "hold"
ON_STEP_ERROR_CHOICES = (RAISE, HOLD)
HELD_STATE = "HELD"
HELD_EVENT = "step_held"
EXCHANGE = "exchange"  # caused_by of what Exchange does on its own (holding a run on a failed step)
# One wait on the mailbox: a watcher wakes it when mail arrives, so this only bounds how long a
# wait lasts before it looks at the run's deadline again (a look without new mail costs no query).
HELD_WAIT_SECONDS = 30.0
MESSAGES_PER_LOOK = 50


def checked_on_step_error(workflow: str, value: object) -> str:
    """``value`` when it is one of :data:`ON_STEP_ERROR_CHOICES`; WorkflowError naming them otherwise."""
    if not isinstance(value, str) or value not in ON_STEP_ERROR_CHOICES:
        allowed = ", ".join(repr(c) for c in ON_STEP_ERROR_CHOICES)
        raise WorkflowError(f"workflow {workflow!r}: on_step_error must be one of {allowed}, got {value!r}")
    return value


def leaves_write_in_doubt(error: BaseException, call: StepCall) -> bool:
    """Whether a failed attempt leaves a tag write in doubt: the tag layer said so (WriteInDoubt), the
    attempt itself was resumed in doubt (its doubt may be unresolved), or it noted progress of a side
    effect that lasts (a phase it started: RESUME re-attaches to it rather than starting anew). A
    write refused by the device, or never sent, is not in doubt."""
    return isinstance(error, WriteInDoubt) or call.resumed_in_doubt or call.note is not None


def hold(ctx: RunContext, call: StepCall, failed: StepRecord, *, in_doubt: bool) -> StepRecord:
    """Commit the failed step's row as held (``failed`` carries its error and attempts) with the
    run's state HELD and a ``step_held`` event; returns the held row."""
    now = ctx.store.clock.now()
    held = StepRecord(
        seq=failed.seq, name=failed.name, status=STEP_HELD_IN_DOUBT if in_doubt else STEP_HELD,
        attempts=failed.attempts, error_type=failed.error_type, error_message=failed.error_message,
        error_blob=failed.error_blob, skipped_ops=failed.skipped_ops, started_at=failed.started_at,
        finished_at=now,
    )
    payload = {"step": held.name, "seq": held.seq, "attempts": held.attempts, "in_doubt": in_doubt,
               "error": {"type": held.error_type, "message": held.error_message}, "caused_by": EXCHANGE}
    ctx.store.record_step_with_events(
        ctx.fence, held, replace=call.row_exists,
        new_events=[*call.take_events(), NewEvent(HELD_EVENT, payload, ctx.actor, None),
                    NewEvent("state", {"state": HELD_STATE, "caused_by": EXCHANGE}, ctx.actor, None)],
        run_fields={"state": HELD_STATE, "updated_at": now},
    )
    call.row_exists = True
    ctx.state = ctx.state_written = HELD_STATE
    log.warning("run %s step %s (sequence %s) failed after %s attempt(s) and is held for an operator: %s: %s",
                ctx.run_id, held.name, held.seq, held.attempts, held.error_type, held.error_message)
    return held


def await_command(ctx: RunContext, call: StepCall, held: StepRecord) -> StepRecord:
    """Wait for RESUME, STOP or ABORT for the ``held`` row and commit what it does (see the module
    doc); returns the row as committed: a fresh start (RESUME) or the ERROR outcome (STOP, ABORT). Raises
    Cancelled, Suspended or OwnershipLost as any wait of the run does."""
    return wait_held(ctx, lambda found: _take(ctx, call, held, found))


def wait_held(ctx: RunContext, take: Callable[[list[MessageRecord]], T | None],
              wanted: Callable[[list[MessageRecord]], bool] = bool) -> T:
    """The wait of a held run (a step held on its failure, a run whose code diverged:
    :mod:`~exchange._engine.execution.code_hold`): the state HELD, its command topic read as cheaply
    as ``recvCommand`` reads it, until ``take`` (given the messages ``wanted`` accepts, oldest
    first) commits an outcome and returns it (None: it only dropped commands, the wait goes on).
    Raises Cancelled (a cancel, the run's deadline), Suspended or OwnershipLost as any wait does."""
    ctx.state = HELD_STATE
    look = [MailLook(commands.COMMAND_TOPIC, MESSAGES_PER_LOOK, wanted)]
    while True:
        timeout_seconds = HELD_WAIT_SECONDS
        if ctx.deadline_at is not None:  # the wait ends at the run's deadline, which check_cancelled raises
            timeout_seconds = min(timeout_seconds, max(0.0, ctx.store.clock.seconds_until(ctx.deadline_at)))
        got = wait_for_mail(ctx, look, timeout_seconds)
        if got is not None:
            done = take(got[1])
            if done is not None:
                return done


def _take(ctx: RunContext, call: StepCall, held: StepRecord, found: list[MessageRecord]) -> StepRecord | None:
    """Judge the messages in HELD and commit the outcome; the new row, or None when all were dropped."""
    held_since = held.finished_at or 0.0

    def sent_before_the_hold(command: commands.Command) -> str | None:
        if command.sent_at < held_since and command.name == "RESUME":
            return (f"RESUME was sent before step {held.name!r} (sequence {held.seq}) was held, while the run "
                    f"was not HELD")
        return None

    judged = commands.judge_commands(found, HELD_STATE, refused=sent_before_the_hold,
                                     about={"step": held.name, "seq": held.seq})
    events, outcomes, chosen = judged.events, judged.outcomes, judged.chosen
    taken = [m.id for m in judged.taken]
    now = ctx.store.clock.now()
    if chosen is None:  # only drops: the held row is recorded again with them
        ctx.store.record_step_with_events(ctx.fence, held, replace=True, consumed_ids=taken, new_events=events,
                                          outcomes=outcomes)
        return None
    assert chosen.name is not None  # judge_commands chooses named commands only
    state = commands.REPORTED_AFTER[chosen.name] or HELD_STATE
    events.append(NewEvent("state", {"state": state, "caused_by": chosen.actor,
                                     "cause": {"cmd": chosen.name, "message_id": chosen.message_id}}, ctx.actor, None))
    in_doubt = held.status == STEP_HELD_IN_DOUBT
    if chosen.name in commands.ENDING_WAITS:  # STOP or ABORT: the step's error is the outcome
        row = StepRecord(
            seq=held.seq, name=held.name, status=STEP_ERROR, attempts=held.attempts, error_type=held.error_type,
            error_message=held.error_message, error_blob=held.error_blob, skipped_ops=held.skipped_ops,
            started_at=held.started_at, finished_at=now,
        )
    else:  # RESUME, the only other command HELD accepts: a fresh start (STARTED marks a write in doubt)
        row = StepRecord(
            seq=held.seq, name=held.name, status=STEP_STARTED if in_doubt else STEP_RETRYING,
            attempts=1 if in_doubt else 0, skipped_ops=held.skipped_ops, started_at=now,
        )
    ctx.store.record_step_with_events(ctx.fence, row, replace=True, consumed_ids=taken, new_events=events,
                                      run_fields={"state": state, "updated_at": now}, outcomes=outcomes)
    ctx.state = ctx.state_written = state
    call.row_exists = True
    log.info("run %s step %s (sequence %s): %s by %s ends its hold", ctx.run_id, held.name, held.seq,
             chosen.name, chosen.actor)
    return row


def held_view(step: StepRecord) -> HeldOnView:
    """``held_on`` of a run's view: the held step, its error and since when (store clock, ISO)."""
    return {
        "seq": step.seq,
        "step": step.name,
        "attempts": step.attempts,
        "error": {"type": step.error_type, "message": step.error_message},
        "in_doubt": step.status == STEP_HELD_IN_DOUBT,
        "since": None if step.finished_at is None else iso_utc(step.finished_at),
        "cause": "step",
    }


def held_text(step: StepRecord) -> str:
    """One line for a surface that shows text (the OPC UA server of runs)."""
    doubt = " (a tag write is in doubt)" if step.status == STEP_HELD_IN_DOUBT else ""
    return f"step {step.seq} {step.name}: {step.error_type}: {step.error_message}{doubt}"
