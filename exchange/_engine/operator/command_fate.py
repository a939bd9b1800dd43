"""What becomes of an operator command: foreseen before it is sent, learnt after.

:func:`judge` tells whether a run will accept a command sent now, from its status, the ISA-88 state
it reported last and the commands already waiting in its mailbox (``exchange send`` warns with it,
``--strict`` refuses). :func:`outcome` reads what the run did with a sent message: still waiting,
consumed (with the state the run reported next) or dropped (with why); :func:`wait_outcome` waits
for it. They read the store only, so they work from any process: the CLI, the HTTP API, a test.
"""

from __future__ import annotations

import time
from typing import Any

from exchange._engine.model import commands
from exchange._store import MESSAGE_CONSUMED, MESSAGE_DROPPED, MessageFate, RunRecord, Store, codec
from exchange.errors import UnknownRun, WorkflowError

WAITING = "WAITING"  # still in the mailbox: the run has not received it yet
CONSUMED = MESSAGE_CONSUMED
DROPPED = MESSAGE_DROPPED
_RECEIVE_EVENTS = ("command", "command_dropped")


def _run(store: Store, run_id: str) -> RunRecord:
    rec = store.runs.get(run_id)
    if rec is None:
        raise UnknownRun(run_id)
    return rec


def judge(store: Store, run_id: str, command: commands.CommandName, topic: str = commands.COMMAND_TOPIC
          ) -> str | None:
    """Why run ``run_id`` will not accept ``command`` (a normalised name) sent now, or None when it
    will or nobody can tell yet (the run has reported no state: it has not started, or never
    received a command). Commands already waiting are taken into account: they are received first.
    UnknownRun for an unknown id."""
    rec = _run(store, run_id)
    if rec.finished:
        return f"the run is already finished ({rec.status})"
    waiting = [commands.Command.parse(m).raw for m in store.mailbox.waiting_before(run_id, topic)]
    return commands.foreseen_problem(command, rec.state, [w for w in waiting if isinstance(w, str)])


def _verdict_from_events(store: Store, fate: MessageFate) -> tuple[str, str | None]:
    """CONSUMED or DROPPED with the note, for a message consumed before the store kept outcomes:
    the receive's events say (a message on a plain topic has none: it was received)."""
    assert fate.consumed_seq is not None
    for event in store.events.at_step(fate.run_id, fate.consumed_seq, _RECEIVE_EVENTS):
        payload = codec.loads(event.payload)
        if isinstance(payload, dict) and payload.get("message_id") == fate.id:
            if event.kind == "command_dropped":
                return DROPPED, event.reason
            return CONSUMED, f"accepted in state {payload.get('state')}"
    return CONSUMED, None


def outcome(store: Store, run_id: str, message_id: int) -> dict[str, Any]:
    """What became of message ``message_id`` of run ``run_id``, as a JSON-ready dict:

    ``run``, ``message_id``, ``cmd`` (the command, or None for a plain message), ``outcome``
    (WAITING, CONSUMED or DROPPED), ``note`` (why it was dropped, or the state that accepted it),
    ``step_seq`` (the receive that took it), ``status`` and ``state`` (the run's now) and
    ``state_after`` (the first state the run reported after taking it; None until it does).

    A message still waiting when the run finished is DROPPED: nothing will read it any more.
    UnknownRun for an unknown run; WorkflowError when the run has no such message."""
    rec = _run(store, run_id)
    fate = store.mailbox.fate(message_id)
    if fate is None or fate.run_id != run_id:
        raise WorkflowError(f"run {run_id} has no message {message_id}")
    cmd = commands.Command.from_payload(message_id, codec.loads(fate.payload)).raw  # as sent, on any topic
    view: dict[str, Any] = {
        "run": run_id, "message_id": message_id, "cmd": cmd if isinstance(cmd, str) else None,
        "outcome": WAITING, "note": None, "step_seq": fate.consumed_seq,
        "status": rec.status, "state": rec.state, "state_after": None,
    }
    if fate.consumed_at is None:
        if rec.finished:
            view.update(outcome=DROPPED, note=f"the run finished ({rec.status}) before it received the message")
        return view
    if fate.outcome is not None:
        view.update(outcome=fate.outcome, note=fate.outcome_note)
    else:
        verdict, note = _verdict_from_events(store, fate)
        view.update(outcome=verdict, note=note)
    assert fate.consumed_seq is not None
    receive = store.events.at_step(run_id, fate.consumed_seq, _RECEIVE_EVENTS)
    if view["outcome"] == CONSUMED and receive:
        reported = store.events.first_after(run_id, "state", receive[-1].id)
        if reported is not None:
            payload = codec.loads(reported.payload)
            view["state_after"] = payload.get("state") if isinstance(payload, dict) else None
        elif rec.finished:
            view["state_after"] = rec.state
    return view


def settled(view: dict[str, Any]) -> bool:
    """Is there nothing more to wait for: dropped, or consumed and followed by a reported state
    (or the end of the run)?"""
    if view["outcome"] == DROPPED:
        return True
    return view["outcome"] == CONSUMED and (view["state_after"] is not None or view["status"] in (
        "SUCCESS", "ERROR", "CANCELLED"))


def wait_outcome(
    store: Store, run_id: str, message_id: int, timeout_seconds: float, poll_seconds: float
) -> dict[str, Any]:
    """:func:`outcome` once it is :func:`settled`, or as it is when ``timeout_seconds`` have passed
    (still WAITING, or CONSUMED without a state reported after it)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        view = outcome(store, run_id, message_id)
        remaining = deadline - time.monotonic()
        if settled(view) or remaining <= 0:
            return view
        time.sleep(min(poll_seconds, remaining))
