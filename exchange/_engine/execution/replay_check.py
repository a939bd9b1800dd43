"""A replay-only execution: the workflow code of now, run over a run's recorded history, executing nothing.

``exchange check-replay`` and ``exchange.workflows.testing.replay_history`` prove that new workflow
code replays the runs in flight before it is deployed. They do it with the engine's own replay path,
not a copy of it: :func:`replay_only` calls the workflow's function under a :class:`RunContext` with
``check_only`` set, so every step call, receive, prompt, unit, sleep and ``patched`` goes through
:func:`~exchange._engine.execution.replay.place` as in a gateway. Recorded calls answer their recorded
outputs (or raise their recorded errors); the first call past the record raises
:class:`~exchange._engine.execution.replay.HistoryEnded` instead of executing, waiting or writing,
and the check ends there: the history is replayed as far as it goes.

Nothing is written: ``replaying()`` is true throughout (states, progress and published values are
kept in memory), and the context's fence names an owner no run has (:data:`CHECK_OWNER`, generation
-1), so a fenced write that would still be tried is refused by the store. The store is only read
(by what the workflow reads itself, ``getRun`` say).

The outcome (:class:`ReplayOutcome`) is ``ok`` (the history replays up to its end: ``ends_at`` the
sequence number and ``next_call`` what the code calls there, or ``"return"``), ``diverges`` (with a
:class:`Divergence`: where, what the history holds and what the code does now) or ``error`` (the
check itself could not be made: the store failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exchange._config import EngineConfig
from exchange._engine.definition import WorkflowDef
from exchange._engine.execution.context import RunContext, bind, unbind
from exchange._engine.execution.execution_lease import Lease
from exchange._engine.execution.replay import PATCH_STEP_PREFIX, HistoryEnded, tail_is_here
from exchange._store import Fence, StepRecord, Store, codec
from exchange.errors import InvalidParams, NonDeterminismError, OwnershipLost, RunControl, StoreError, StoreLost

CHECK_OWNER = "exchange check-replay (writes nothing)"
OK = "ok"
DIVERGES = "diverges"
ERROR = "error"

# Divergence.kind
STEP = "step"  # the code calls another step where the history holds one
IDLE = "idle"  # the history holds idle polls or a sleep where the code calls a step (or the reverse)
PATCHED = "patched"  # a patched() decision differs: a marker the code no longer asks for, or asks elsewhere
RETURNED_EARLY = "returned_early"  # the workflow ended with recorded steps left that it no longer calls
RAISES = "raises"  # the workflow raises where the old code went on
SIGNATURE = "signature"  # the run's parameters no longer fit the workflow's signature or parameter types
NO_WORKFLOW = "no_workflow"  # no workflow of the run's name is registered now


@dataclass(frozen=True)
class History:
    """What a replay needs of a run: its workflow, parameters (decoded), the code version that
    recorded it, the recorded steps by sequence number and the run row's tail of idle operations
    (see :mod:`exchange._engine.execution.replay`)."""

    run_id: str
    workflow: str
    params: dict[str, Any]
    code_version: str
    steps: dict[int, StepRecord]
    quiet_after_seq: int | None = None
    quiet_ops: int | None = None
    quiet_wake_at: float | None = None
    state: str | None = None
    actor: str = "exchange"


@dataclass(frozen=True)
class Divergence:
    """Where the code leaves the history: ``kind`` (see the module's constants), ``seq`` the
    sequence number (None for a signature or a missing workflow), ``recorded`` the recorded step
    there (``{"name", "status", "output"}``, ``output`` the shape of its output; None when none),
    ``now`` what the code does there in words, ``called`` and ``arguments`` the call it makes and
    the types of its arguments (when it calls a step), ``message`` the whole sentence."""

    kind: str
    seq: int | None
    now: str
    message: str
    recorded: dict[str, Any] | None = None
    called: str | None = None
    arguments: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, "recorded": self.recorded, "now": self.now,
                "called": self.called, "arguments": self.arguments, "message": self.message}


@dataclass(frozen=True)
class ReplayOutcome:
    """One run's check (see the module docstring; ``as_dict`` is the JSON of ``check-replay --json``)."""

    run_id: str
    workflow: str
    status: str
    code_version_recorded: str
    code_version_now: str | None
    steps_replayed: int = 0
    ends_at: int | None = None
    next_call: str | None = None
    divergence: Divergence | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "workflow": self.workflow, "status": self.status,
                "code_version_recorded": self.code_version_recorded, "code_version_now": self.code_version_now,
                "steps_replayed": self.steps_replayed, "ends_at": self.ends_at, "next_call": self.next_call,
                "divergence": None if self.divergence is None else self.divergence.as_dict(), "error": self.error}


def shape(value: Any) -> str:
    """The shape of a JSON value, not its content: ``{"ok": bool, "n": int}``, ``list[3]``, ``str``."""
    if isinstance(value, dict):
        inner = ", ".join(f"{key!r}: {type(item).__name__}" for key, item in list(value.items())[:8])
        return "{" + inner + (", ..." if len(value) > 8 else "") + "}"
    if isinstance(value, list):
        return f"list[{len(value)}]"
    return "null" if value is None else type(value).__name__


def recorded_step(rec: StepRecord) -> dict[str, Any]:
    """A recorded step as a divergence shows it: name, status and the shape of its output."""
    output: str | None = None
    if rec.output is not None:
        try:
            output = shape(codec.loads(rec.output))
        except ValueError:
            output = "unreadable"
    return {"name": rec.name, "status": rec.status, "output": output,
            **({"error": rec.error_type} if rec.error_type else {})}


def no_workflow(history: History, known: list[str]) -> ReplayOutcome:
    """The outcome of a run whose workflow is not registered now."""
    message = (f"run {history.run_id}: workflow {history.workflow!r} is not registered in the apps now "
               f"(registered: {', '.join(known) or 'none'})")
    return ReplayOutcome(history.run_id, history.workflow, DIVERGES, history.code_version, None,
                         divergence=Divergence(NO_WORKFLOW, None, "the workflow no longer exists", message))


def replay_only(store: Store, settings: EngineConfig, definition: WorkflowDef, history: History) -> ReplayOutcome:
    """Replay ``history`` against ``definition`` as it is now, executing nothing (module docstring)."""
    now_version = definition.code_version
    try:
        definition.bind_params(history.params, known_json=True)
    except InvalidParams as exc:
        message = f"run {history.run_id}: its parameters no longer fit: {exc}"
        return ReplayOutcome(history.run_id, history.workflow, DIVERGES, history.code_version, now_version,
                             divergence=Divergence(SIGNATURE, None, str(exc), message))
    fence = Fence(history.run_id, CHECK_OWNER, -1)
    ctx = RunContext(
        store=store, settings=settings, lease=Lease(fence, settings.lease_seconds), run_id=history.run_id,
        workflow=history.workflow, actor=history.actor, recorded=dict(history.steps),
        on_step_error=definition.on_step_error, quiet_after_seq=history.quiet_after_seq,
        quiet_ops=history.quiet_ops, quiet_wake_at=history.quiet_wake_at, state=history.state,
        state_written=history.state, check_only=True,
    )

    def outcome(status: str, **fields: Any) -> ReplayOutcome:
        return ReplayOutcome(history.run_id, history.workflow, status, history.code_version, now_version,
                             steps_replayed=sum(1 for seq in ctx.recorded if seq < ctx.next_seq), **fields)

    token = bind(ctx)
    try:
        definition.fn(**history.params)
    except HistoryEnded as end:
        if ctx.divergence is None:
            first = _first_end(end)
            return outcome(OK, ends_at=first.seq, next_call=first.name)
    except NonDeterminismError:
        pass  # the divergence is kept on the context
    except (OwnershipLost, StoreLost, StoreError) as exc:
        if ctx.divergence is None:
            return outcome(ERROR, error=f"the check could not go on: {exc}")
    except RunControl as exc:
        if ctx.divergence is None:
            return outcome(ERROR, error=f"the workflow stopped the check: {type(exc).__name__}: {exc}")
    except Exception as exc:
        if ctx.divergence is None:
            return outcome(DIVERGES, divergence=_ended(ctx, f"raises {type(exc).__name__}: {exc}"))
    else:
        if ctx.divergence is None:
            left = _history_left(ctx)
            if left is None:
                return outcome(OK, ends_at=ctx.next_seq, next_call="return")
            return outcome(DIVERGES, divergence=_ended(ctx, "returns"))
    finally:
        unbind(token)
    assert ctx.divergence is not None
    return outcome(DIVERGES, divergence=_divergence(ctx, ctx.divergence))


def _first_end(end: HistoryEnded) -> HistoryEnded:
    """Where the history ended first: cleanup on the way out (a ``with units.acquire`` block's
    release, a ``finally``) calls past the record too, and its HistoryEnded replaces the first one,
    which Python keeps as its ``__context__``."""
    first = end
    seen: BaseException | None = end
    while seen is not None:
        if isinstance(seen, HistoryEnded):
            first = seen
        seen = seen.__context__
    return first


def _history_left(ctx: RunContext) -> str | None:
    """What the history holds past the context's position (None: nothing, the code got to its end)."""
    if ctx.next_seq <= ctx.frontier:
        later = sorted(seq for seq in ctx.recorded if seq >= ctx.next_seq)
        names = [ctx.recorded[seq].name for seq in later[:3]]
        more = ", ..." if len(later) > 3 else ""
        return f"{len(later)} recorded step(s) from sequence {later[0]} ({', '.join(names)}{more})"
    if tail_is_here(ctx) and ctx.quiet_ops is not None and (
        ctx.quiet_count < ctx.quiet_ops or ctx.quiet_wake_at is not None
    ):
        return "idle polls or a sleep recorded after the last step"
    return None


def _ended(ctx: RunContext, what: str) -> Divergence:
    """The workflow ended (returned, or raised ``what``) at the context's position."""
    left = _history_left(ctx)
    seq = ctx.next_seq
    rec = ctx.recorded.get(seq)
    recorded = recorded_step(rec) if rec is not None else None
    if left is None:
        message = (f"run {ctx.run_id}: after sequence {seq - 1}, where the history ends, the workflow now {what}; "
                   "the code that recorded it went on")
        return Divergence(RAISES, seq, f"the workflow {what}", message, recorded)
    message = f"run {ctx.run_id}: at sequence {seq} the workflow now {what}, but the history holds {left}"
    return Divergence(RETURNED_EARLY, seq, f"the workflow {what}", message, recorded)


def _divergence(ctx: RunContext, exc: NonDeterminismError) -> Divergence:
    seq = exc.seq if exc.seq is not None else ctx.next_seq
    rec = ctx.recorded.get(seq) if exc.recorded is not None else None
    recorded = recorded_step(rec) if rec is not None else None
    called = exc.called or "?"
    recorded_name = exc.recorded or ""
    if recorded_name.startswith(PATCH_STEP_PREFIX):
        kind, now = PATCHED, (f"calls {called} where the run took the new path of "
                              f"patched({recorded_name[len(PATCH_STEP_PREFIX):]!r})")
    elif exc.recorded is None:
        kind, now = IDLE, f"calls {called} where the history holds idle polls or a sleep"
    else:
        kind, now = STEP, f"calls {called}"
    if exc.arguments is not None:
        now += f" with {exc.arguments}"
    return Divergence(kind, seq, now, str(exc), recorded, exc.called, exc.arguments)
