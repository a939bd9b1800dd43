"""Hold a run whose recorded history diverges from the workflow code loaded now.

A gateway executing a run again (it resumes it after a restart, takes it over, goes on after a
RESUME) replays the run's recorded steps through the workflow code it loaded. When that code no
longer calls what the history holds (a :class:`~exchange.errors.NonDeterminismError`: a step renamed,
inserted or removed under a run in flight; ``exchange check-replay`` finds them before a deploy), the
run is not failed: it is held for an operator, as a step that failed under ``on_step_error="hold"``
is (:mod:`~exchange._engine.execution.hold`, whose wait it shares), the cause being the code:

- at once a WARNING names the run, the sequence number, the recorded step and what the code calls
  now; nothing past the recorded history was executed (a divergence is met while replaying);
- in one commit: a ``code_held`` event (``{"seq", "recorded", "called", "arguments", "detail",
  "since", "caused_by": "exchange"}``), the state HELD, and on the run row, while it is held, the
  error ``NonDeterminismError`` with the detail (``history diverges at step 4: recorded tags.write,
  the code now calls tags.read; ...``): what ``exchange show`` and the attention list (reason
  ``code``) say;
- the run waits on its command topic as cheaply as a held step. Commands sent before the hold are the
  workflow's: they stay in the mailbox for it. Of those sent since: RESUME is consumed, the run's
  error cleared and its state RUNNING in one commit, and the executor replays the run again from its
  history with the code loaded now (it goes on, or diverges and is held again with the new detail);
  STOP or ABORT is consumed with the state STOPPED (ABORTED) and the run ends ERROR with the
  divergence; HOLD and RESET are dropped (``command_dropped``). A cancel ends it CANCELLED.

Durable: the run row says the run is held on its code (state HELD, error ``NonDeterminismError``). A
gateway that executes it again (a restart, a kill -9, a takeover) first replays its history executing
nothing (:func:`recheck`, the replay-only execution of ``check-replay``): still diverging, it logs
again and holds it (with the new detail if it diverges elsewhere now); replaying now, it says so and
still waits for RESUME: an operator decides when a held run goes on. The hold keeps its ``since``, so
a RESUME sent while it was held, before the restart, is taken.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from exchange._engine.definition import WorkflowDef
from exchange._engine.execution.context import RunContext
from exchange._engine.execution.hold import EXCHANGE, HELD_STATE, wait_held
from exchange._engine.execution.replay_check import Divergence, History, ReplayOutcome, replay_only
from exchange._engine.model import HeldOnView, commands
from exchange._store import CODE_HELD_ERROR, MessageRecord, NewEvent, RunRecord, Store, codec
from exchange._timefmt import iso_utc
from exchange.errors import NonDeterminismError

log = logging.getLogger(__name__)

CODE_HELD_EVENT = "code_held"  # read by the attention list too (exchange/_store/runs/attention.py)
FIX = "fix the code (exchange check-replay) and RESUME"
REPLAYS_NOW = "the code loaded now replays the run's history: RESUME to go on"
RESUMED = "RESUME"


@dataclass(frozen=True)
class CodeHold:
    """Where and why a run is held on its code: the sequence number, the recorded step there and
    what the code calls instead (None when not known), the detail people read, and since when
    (store clock)."""

    seq: int | None
    recorded: str | None
    called: str | None
    detail: str
    since: float
    arguments: str | None = None

    def view(self) -> HeldOnView:
        """``held_on`` of the run's view (``cause`` ``"code"``)."""
        return {"seq": self.seq, "step": self.recorded, "attempts": 0, "in_doubt": False, "cause": "code",
                "error": {"type": CODE_HELD_ERROR, "message": self.detail}, "since": iso_utc(self.since)}

    def payload(self) -> dict[str, object]:
        return {"seq": self.seq, "recorded": self.recorded, "called": self.called, "arguments": self.arguments,
                "detail": self.detail, "since": self.since, "caused_by": EXCHANGE}


def is_held_on_code(rec: RunRecord) -> bool:
    """Whether the unfinished run ``rec`` is held because its code diverged from its history."""
    return not rec.finished and rec.state == HELD_STATE and rec.error_type == CODE_HELD_ERROR


def detail_text(seq: int | None, recorded: str | None, called: str | None) -> str:
    where = "" if seq is None else f" at step {seq}"
    return (f"history diverges{where}: recorded {recorded or 'idle polls or a sleep'}, the code now calls "
            f"{called or 'something else'}; {FIX}")


def from_error(exc: NonDeterminismError, since: float) -> CodeHold:
    return CodeHold(exc.seq, exc.recorded, exc.called, detail_text(exc.seq, exc.recorded, exc.called), since,
                    exc.arguments)


def from_divergence(found: Divergence, since: float) -> CodeHold:
    """A replay-only check's divergence as a hold (a workflow ending early, a signature or a workflow
    gone say what the code does now in words)."""
    recorded = None if found.recorded is None else str(found.recorded.get("name"))
    if found.called is not None:
        return CodeHold(found.seq, recorded, found.called, detail_text(found.seq, recorded, found.called), since,
                        found.arguments)
    where = "" if found.seq is None else f" at step {found.seq}"
    return CodeHold(found.seq, recorded, None, f"history diverges{where}: {found.now}; {FIX}", since)


def last_hold(store: Store, rec: RunRecord) -> CodeHold:
    """The hold the run row says the run is in (see :func:`is_held_on_code`), from its newest
    ``code_held`` event; a hold made of the row alone if the event cannot be read."""
    found = store.events.list(rec.id, [CODE_HELD_EVENT], limit=1)
    body = codec.loads(found[0].payload) if found and found[0].payload else None
    if not isinstance(body, dict):
        return CodeHold(None, None, None, rec.error_message or FIX, rec.updated_at)
    since = body.get("since")
    return CodeHold(body.get("seq"), body.get("recorded"), body.get("called"), str(body.get("detail") or FIX),
                    float(since) if isinstance(since, int | float) else found[0].at, body.get("arguments"))


def hold(ctx: RunContext, held: CodeHold) -> CodeHold:
    """Log it and commit the hold (module docstring); returns it."""
    now = ctx.store.clock.now()
    ctx.store.record_run_change(
        ctx.fence, seq=held.seq or 0, label=f"the run held on its code (sequence {held.seq})",
        new_events=[NewEvent(CODE_HELD_EVENT, held.payload(), ctx.actor, None),
                    NewEvent("state", {"state": HELD_STATE, "caused_by": EXCHANGE}, ctx.actor, None)],
        run_fields={"state": HELD_STATE, "error_type": CODE_HELD_ERROR, "error_message": held.detail,
                    "updated_at": now},
    )
    ctx.state = ctx.state_written = HELD_STATE
    warn(ctx.run_id, ctx.workflow, held)
    return held


def warn(run_id: str, workflow: str, held: CodeHold) -> None:
    log.warning("run %s of %s is held: its recorded history diverges from the code loaded now at sequence %s: "
                "recorded %s, the code now calls %s%s; nothing was executed. Fix the code (exchange "
                "check-replay %s) and RESUME it", run_id, workflow, held.seq, held.recorded or "idle polls or a sleep",
                held.called or "something else", f" with {held.arguments}" if held.arguments else "", run_id)


def recheck(store: Store, ctx: RunContext, definition: WorkflowDef, rec: RunRecord) -> ReplayOutcome:
    """Replay the run's history against ``definition`` executing nothing (``ctx``: the settings)."""
    history = History(run_id=rec.id, workflow=rec.workflow, params=codec.loads(rec.params) or {},
                      code_version=rec.code_version, steps=store.steps.load(rec.id),
                      quiet_after_seq=rec.quiet_after_seq, quiet_ops=rec.quiet_ops, quiet_wake_at=rec.quiet_wake_at,
                      state=rec.state, actor=rec.created_by)
    return replay_only(store, ctx.settings, definition, history)


def held_again(ctx: RunContext, held: CodeHold, outcome: ReplayOutcome) -> CodeHold:
    """A run found held on its code by this execution, rechecked (``outcome``): log it again and
    record a new detail when it changed (keeping ``since``); returns the hold it waits in."""
    if outcome.ok:
        log.warning("run %s of %s is held on its code: %s", ctx.run_id, ctx.workflow, REPLAYS_NOW)
        now = CodeHold(held.seq, held.recorded, held.called, REPLAYS_NOW, held.since, held.arguments)
    elif outcome.divergence is not None:
        now = from_divergence(outcome.divergence, held.since)
        warn(ctx.run_id, ctx.workflow, now)
    else:  # the check itself could not be made (the store failed): the hold stays as it was
        log.warning("run %s of %s stays held on its code; it could not be checked again: %s", ctx.run_id,
                    ctx.workflow, outcome.error)
        return held
    if now.detail != held.detail:
        ctx.store.record_run_change(
            ctx.fence, seq=now.seq or 0, label=f"the run held on its code (sequence {now.seq})",
            new_events=[NewEvent(CODE_HELD_EVENT, now.payload(), ctx.actor, None)],
            run_fields={"error_message": now.detail, "updated_at": ctx.store.clock.now()},
        )
    return now


def await_command(ctx: RunContext, held: CodeHold) -> str:
    """Wait for RESUME, STOP or ABORT sent since the hold and commit what it does (module
    docstring); returns the command's name. Raises Cancelled, Suspended or OwnershipLost as any wait
    of the run does."""
    def since_the_hold(found: list[MessageRecord]) -> list[MessageRecord]:
        return [m for m in found if m.sent_at >= held.since]

    return wait_held(ctx, lambda found: _take(ctx, held, since_the_hold(found)),
                     wanted=lambda found: bool(since_the_hold(found)))


def _take(ctx: RunContext, held: CodeHold, found: list[MessageRecord]) -> str | None:
    about = {"cause": "code", "seq": held.seq}
    judged = commands.judge_commands(found, HELD_STATE, about=about)
    seq = held.seq or 0
    taken = [m.id for m in judged.taken]
    if judged.chosen is None:  # only drops
        ctx.store.record_run_change(ctx.fence, seq=seq, label="commands dropped by a run held on its code",
                                    consumed_ids=taken, new_events=judged.events, outcomes=judged.outcomes)
        return None
    chosen = judged.chosen
    assert chosen.name is not None  # judge_commands chooses named commands only
    state = commands.REPORTED_AFTER[chosen.name] or HELD_STATE
    events = [*judged.events, NewEvent("state", {"state": state, "caused_by": chosen.actor,
                                                 "cause": {"cmd": chosen.name, "message_id": chosen.message_id}},
                                       ctx.actor, None)]
    fields: dict[str, object] = {"state": state, "updated_at": ctx.store.clock.now()}
    if chosen.name == RESUMED:  # no longer held: its error goes (a STOP's end writes it as the run's)
        fields.update(error_type=None, error_message=None)
    ctx.store.record_run_change(ctx.fence, seq=seq, label=f"{chosen.name} of a run held on its code",
                                consumed_ids=taken, new_events=events, outcomes=judged.outcomes, run_fields=fields)
    ctx.state = ctx.state_written = state
    log.info("run %s held on its code: %s by %s ends its hold", ctx.run_id, chosen.name, chosen.actor)
    return chosen.name
