"""``control.checkpoint``: the operator's HOLD, RESUME, STOP and ABORT, handled the ISA-88 way in one call.

Call it wherever the workflow may pause (between phases, once per pass of a fill loop); catch
:class:`~exchange.errors.StopRequested` once, around the whole body, to shut down (an ABORT raises
:class:`~exchange.errors.AbortRequested`, a StopRequested too: catch it first to tell it apart)::

    from exchange.errors import StopRequested
    from exchange.workflows.steps import control

    try:
        while not full():
            control.checkpoint(on_hold=close_inlet, on_resume=open_inlet, wait_ms=500)
            ...
    except StopRequested:
        shut_down()
        rt.setState("STOPPED")
        return {"stopped": True}

It is built from ``recvCommand`` and ``setState`` (no step of its own), so a run replays through it
like through any receive: a recorded HOLD is held again, without calling ``on_hold`` a second time
unless its steps were not recorded.

Who did it: what ``on_hold`` does (its tag writes, method calls) and the HELD state are recorded
with the run's actor and, beside it, ``caused_by``, the HOLD's sender, and ``cause``, ``{"cmd":
"HOLD", "message_id": ...}``; what ``on_resume`` does and the state reported after it, with the
RESUME's sender (see :meth:`~exchange._engine.execution.context.RunContext.caused_by`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, cast

from exchange._arguments import number, shown
from exchange._engine import ALLOWED_IN, ENDING_WAITS, current_run, getWorkflows, stop_error
from exchange.errors import AbortRequested, InvalidArgument, StopRequested

__all__ = ["AbortRequested", "StopRequested", "checkpoint"]

_CALL = "control.checkpoint"
# While HELD the run waits for RESUME, STOP or ABORT. The wait wakes at once when a command arrives (or the
# run is cancelled); the timeout only bounds one receive, and an idle receive writes nothing.
HELD_WAIT_SECONDS = 10.0


def _checked_callback(name: str, value: Any) -> Callable[[], Any] | None:
    if value is not None and not callable(value):
        raise InvalidArgument(f"{_CALL}: {name} must be None or a function without arguments, got {shown(value)}")
    return cast("Callable[[], Any] | None", value)


@contextlib.contextmanager
def _caused_by(command: dict[str, Any]) -> Iterator[None]:
    """What the run records in the block was caused by ``command`` (its sender, its cmd and id)."""
    ctx = current_run()
    if ctx is None:  # pragma: no cover - recvCommand answered, so this is a run's body
        yield
        return
    with ctx.caused_by(command.get("actor"), {"cmd": command.get("cmd"), "message_id": command.get("id")}):
        yield


def checkpoint(
    *,
    on_hold: Callable[[], Any] | None = None,
    on_resume: Callable[[], Any] | None = None,
    wait_ms: float = 0,
    state: str = "RUNNING",
) -> dict[str, Any] | None:
    """Receive the operator's next command and act on it; return when the run may carry on.

    - Nothing arrives within ``wait_ms``: returns None. The run's state is reported as ``state``.
    - HOLD: calls ``on_hold()`` (make the plant safe: your steps), sets the progress to
      ``held: <reason>``, reports HELD and waits, without cost, for RESUME, STOP or ABORT. On
      RESUME it calls ``on_resume()``, reports ``state`` again and returns the RESUME command
      (``{"cmd", "reason", "actor", "sent_at", ...}``).
    - STOP, when running or held: raises :class:`~exchange.errors.StopRequested` carrying the command.
    - ABORT, when running or held: raises :class:`~exchange.errors.AbortRequested` (a subclass of
      StopRequested) carrying the command.

    Commands are taken one at a time, in the order they were sent: a HOLD, RESUME and STOP sent
    back to back are each honoured. One the state does not accept is dropped as ``recvCommand``
    drops it (a RESUME while running, a second HOLD while held).

    ``state``: the state the run is in, one that accepts HOLD (STARTING, RUNNING, RESUMING; name
    phases with ``progress``, not with the state). ``wait_ms``: a finite number >= 0.
    ``on_hold``/``on_resume``: None or functions without arguments. A bad argument raises
    InvalidArgument before anything is received; outside a run, OutsideRunError.
    """
    hold = _checked_callback("on_hold", on_hold)
    resume = _checked_callback("on_resume", on_resume)
    wait_s = number(_CALL, "wait_ms", wait_ms, minimum=0) / 1000
    running = state.strip().upper() if isinstance(state, str) else state
    if running not in ALLOWED_IN["HOLD"]:
        raise InvalidArgument(
            f"{_CALL}: state must be one that accepts HOLD ({', '.join(sorted(ALLOWED_IN['HOLD']))}), got "
            f"{shown(state)}; report a phase name with rt.progress(), not as the state"
        )
    rt = getWorkflows()
    cmd = rt.recvCommand(currentState=running, timeoutSeconds=wait_s, maxMessages=1)
    if cmd is None:
        return None
    if cmd["cmd"] in ENDING_WAITS:
        raise stop_error(cmd)
    # HOLD: the only other command a state that accepts HOLD accepts. What on_hold writes, and the
    # HELD state the first receive below reports, are the HOLD's sender's doing.
    with _caused_by(cmd):
        if hold is not None:
            hold()
        rt.progress("held: %s" % (cmd.get("reason") or "no reason given"))
        while True:
            cmd = rt.recvCommand(currentState="HELD", timeoutSeconds=HELD_WAIT_SECONDS, maxMessages=1)
            if cmd is None:
                continue
            if cmd["cmd"] in ENDING_WAITS:
                raise stop_error(cmd)
            if cmd["cmd"] == "RESUME":
                break
    with _caused_by(cmd):
        if resume is not None:
            resume()
        rt.setState(running)
    return cmd
