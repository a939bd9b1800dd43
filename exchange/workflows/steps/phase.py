"""``phase.run``: command an equipment phase that the PLC runs, over a Phase Logic Interface
(``[phases."UNIT/PHASE"]`` in the config; ../shared/DESIGN.md, "Equipment phases").

One durable step however long the phase runs. The PLC owns the phase's state; Exchange writes
command numbers and follows the state. From Idle (waiting out Permissive): the parameters are written
and read back, the owner written, Start sent; the state is followed (by subscription on OPC UA,
polled elsewhere); at Complete the reports are read, Reset sent and Idle awaited; the call returns
the reports. A phase found Complete, Stopped or Aborted from an earlier batch is reset first.

The run's commands reach the phase while it runs: HOLD sends Hold and the run reports HELD once the
PLC says Held; RESUME sends Restart (PackML: Unhold); STOP sends Stop and the call raises
PhaseStopped once the phase is Stopped; ABORT sends Abort and raises PhaseAborted. A phase the PLC
holds by itself holds the run (``HELD``, on the attention list as held by the equipment); RESUME
restarts it. Before Start, STOP or ABORT ends the call with StopRequested or AbortRequested and
nothing is sent to the phase. Every command
written and every state seen is in the run's events (``phase_command``, ``phase_state``).

Durable: a gateway killed or taken over at any point re-attaches to the phase in the state the PLC
reports, and Start is sent once for one call (see :mod:`exchange.workflows.steps._phase_handshake`).
An owner tag holding another batch system's id: nothing is written, PhaseOwnedElsewhere. A lost link
is ridden out as tag writes ride it out (the device's ``comm_timeout_s``). A cancel ends the run and
leaves the phase as the PLC has it (as a cancel leaves every tag written): send STOP or ABORT first
to stop the equipment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exchange._arguments import optional_number, positive_number, shown
from exchange._engine import ON_ERROR, current_run, library_step, stop_error, units_held_in_run
from exchange.errors import InvalidArgument, OutsideRunError, PhaseAborted, PhaseStopped
from exchange.workflows.steps import _phase_plc
from exchange.workflows.steps._phase_handshake import Handshake
from exchange.workflows.steps.tags import TAG_WRITE_OPTIONS, audit_listener, tag_service, wait_hooks

__all__ = ["run"]

_CALL = "phase.run"


def run(
    name: str,
    params: Mapping[str, Any] | None = None,
    timeout_s: float | None = None,
    poll_ms: float = 250,
    *,
    on_error: str | None = None,
) -> dict[str, Any]:
    """Run the configured phase ``name`` (``"R1/Charge"``) to Complete; returns ``{"phase", "state":
    "COMPLETE", "reports": {...}, "started_at", "finished_at"}`` (ISO times).

    ``params``: values for the phase's ``params`` keys (each converted to its tag's type and checked
    before anything is written; a key the phase does not declare is refused). ``timeout_s``: None
    (no limit) or a finite number > 0, the time to Complete with the time held not counted
    (PhaseTimeout, the phase left as it is). ``poll_ms``: how often the state is read where it is
    not subscribed to (one request per device and interval for all the phases followed on it). A
    bad argument raises InvalidArgument before anything is read or written.

    Raises PhaseStopped / PhaseAborted when the phase goes Stopped / Aborted, PhaseOwnedElsewhere,
    PhaseTimeout (Start not taken within ``start_timeout_s``, a command not answered within
    ``command_timeout_s``, or ``timeout_s``), StopRequested (AbortRequested) for a STOP (ABORT) before
    Start. All are
    FatalErrors: the step is not retried; with ``on_error="hold"`` (or the workflow's
    ``on_step_error="hold"``) the run holds for an operator, and RESUME runs the call again, which
    re-attaches to the phase or, from Stopped or Aborted, resets and starts it again. The run's own
    STOP or ABORT is no failure to hold for: its PhaseStopped / PhaseAborted (StopRequested /
    AbortRequested before Start) is raised after the step recorded how the call ended.
    """
    return _ended(_run(name, params, timeout_s, poll_ms, on_error=on_error))


def _ended(outcome: dict[str, Any]) -> dict[str, Any]:
    """The call's result, or the error its recorded outcome says the run's STOP or ABORT ended it with."""
    stopped = outcome.get("stopped")
    if stopped is not None:
        raise stop_error(stopped)
    ended = outcome.get("ended")
    if isinstance(ended, dict):
        error = PhaseAborted if ended.get("error") == PhaseAborted.__name__ else PhaseStopped
        raise error(str(ended.get("message")), outcome.get("phase"), ended.get("state"))
    return outcome


@library_step("phase.run", TAG_WRITE_OPTIONS, per_call=(ON_ERROR,))
def _run(name: Any, params: Any, timeout_s: Any, poll_ms: Any, *, on_error: str | None = None) -> dict[str, Any]:
    phases = tag_service().config.phases
    if not isinstance(name, str) or name not in phases:
        known = ", ".join(sorted(phases)) or "none configured"
        raise InvalidArgument(f"{_CALL}: name must be a configured phase ([phases.\"UNIT/PHASE\"]: {known}), "
                              f"got {shown(name)}")
    phase = phases[name]
    given = dict(params or {})
    if params is not None and not isinstance(params, Mapping):
        raise InvalidArgument(f"{_CALL}: params must be a mapping of parameter names to values, got {shown(params)}")
    unknown = sorted(set(given) - set(phase.params))
    if unknown:
        raise InvalidArgument(f"{_CALL}: phase {name!r} has no parameter {', '.join(map(repr, unknown))} "
                              f"(its params: {', '.join(sorted(phase.params)) or 'none'})")
    timeout = optional_number(_CALL, "timeout_s", timeout_s, minimum=0)
    if timeout is not None and timeout <= 0:
        raise InvalidArgument(f"{_CALL}: timeout_s must be None or a number > 0, got {shown(timeout_s)}")
    poll_s = positive_number(_CALL, "poll_ms", poll_ms) / 1000
    ctx = current_run()
    if ctx is None:
        raise OutsideRunError(f"{_CALL} runs inside a workflow run (it follows the run's commands)")
    if phase.unit is not None and phase.unit not in units_held_in_run(ctx):
        raise InvalidArgument(f"{_CALL}: phase {name!r} belongs to unit {phase.unit!r}, which this run does not "
                              f"hold: command it inside `with units.acquire({phase.unit!r}):`; nothing was written")
    tags = tag_service()
    plc = _phase_plc.PhasePlc(phase, tags)
    plc.plan_start_writes(given, phase.owner_id)  # every value checked before anything is read or written
    plc.plan_command("START")
    handshake = Handshake(ctx, plc, given, timeout_s=timeout, poll_s=poll_s, audit=audit_listener(ctx),
                          hooks=wait_hooks(ctx))
    return handshake.run()
