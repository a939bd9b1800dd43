"""Where a call stands in the run's recorded history, and what replay answers for it.

Every step call takes the next sequence number. Two operations are *quiet*: a ``recv``/``recvCommand``
that found nothing, and a finished ``sleep_chunked``. They leave no step row, so a loop that polls and
sleeps for hours does not grow the store; instead each recorded step stores ``skipped_ops``, how many
quiet operations came before it since the previous recorded step. The run row keeps the *tail*: the
quiet operations after the last recorded step and the wake-up time of the sleep in flight, updated in
place at each sleep.

A replay-only execution (``RunContext.check_only``: ``exchange check-replay``) walks the history
the same way and raises :class:`HistoryEnded` where a call would go live (or sleep what is left),
so nothing past the record is executed, waited for or written.

Replay walks the same sequence: a quiet operation whose position lies before a recorded step (or
inside the tail) answers at once (nothing received / already slept); the sleep that was in flight
sleeps only what is left; past that, calls run live. A call that does not fit the recorded position
is a :class:`NonDeterminismError` naming the sequence number, the recorded and the called step.

A live "nothing received" steers the run as much as a received command does, so it must be durable
before the run's next side effect: the context counts how many quiet answers are durable and writes
the tail before a step executes when some are not
(:meth:`~exchange._engine.execution.context.RunContext.make_answers_durable`). A loop of polls and
sleeps still writes only the tail, in place.
"""

from __future__ import annotations

import base64
import pickle
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from exchange.errors import NonDeterminismError, RecordedStepError

if TYPE_CHECKING:
    from exchange._engine.execution.context import RunContext
    from exchange._store import StepRecord


# The marker step ``rt.patched(patch_id)`` records (exchange._engine.inrun.versioning); named here so
# that a replay-only check can tell a patch decision from a step.
PATCH_STEP_PREFIX = "exchange.patched:"


class HistoryEnded(BaseException):
    """A replay-only execution (:attr:`RunContext.check_only`) reached a call past the recorded
    history: ``seq`` the sequence number it would take, ``name`` the call. Never raised in a run
    that executes; a BaseException so that a workflow's ``except Exception`` does not swallow it."""

    def __init__(self, seq: int, name: str, why: str = "the recorded history ends here") -> None:
        super().__init__(f"{why}: sequence {seq}, {name!r}")
        self.seq = seq
        self.name = name
        self.why = why


class Position(Enum):
    RECORDED = "recorded"  # the call is the recorded step at ctx.next_seq
    QUIET = "quiet"  # the call was a quiet operation: answer at once
    IN_FLIGHT_SLEEP = "in_flight_sleep"  # the sleep that was running at the crash
    LIVE = "live"  # past the recorded history


@dataclass(frozen=True)
class Placement:
    position: Position
    record: StepRecord | None = None


# A live call's placement holds nothing of its own: one serves every call (placements are frozen).
_LIVE = Placement(Position.LIVE)


def tail_is_here(ctx: RunContext) -> bool:
    """Whether the run row's tail (the quiet operations, and the sleep in flight, recorded after
    the last step) lies at the current position: every recorded step is replayed and the tail was
    written right after the last one."""
    return ctx.quiet_ops is not None and ctx.quiet_after_seq == ctx.next_seq - 1 and ctx.next_seq > ctx.frontier


def place(ctx: RunContext, name: str, *, quiet_able: bool, is_sleep: bool = False) -> Placement:
    """Classify a call named ``name`` at the context's current position. An execution that diverged
    goes no further: every later call raises its first divergence again (a workflow's ``except
    Exception`` that swallowed it must not reach a live call on a history it left)."""
    if ctx.divergence is not None and not ctx.check_only:
        raise ctx.divergence
    rec = ctx.recorded.get(ctx.next_seq)
    if rec is not None:
        if ctx.quiet_count < rec.skipped_ops:
            if quiet_able:
                return Placement(Position.QUIET)
            raise _diverges(ctx, NonDeterminismError(
                f"run {ctx.run_id}: at sequence {ctx.next_seq} the run recorded {rec.skipped_ops} idle "
                f"poll/sleep operation(s) before step {rec.name!r}, but step {name!r} was called after "
                f"{ctx.quiet_count}", seq=ctx.next_seq, recorded=None, called=name,
            ))
        if rec.name != name or ctx.quiet_count > rec.skipped_ops:
            raise _diverges(ctx, NonDeterminismError(
                f"run {ctx.run_id}: at sequence {ctx.next_seq} the recorded step is {rec.name!r} "
                f"but the workflow called {name!r}; the workflow code changed under a running run",
                seq=ctx.next_seq, recorded=rec.name, called=name,
            ))
        return Placement(Position.RECORDED, rec)
    if tail_is_here(ctx):
        assert ctx.quiet_ops is not None
        if ctx.quiet_count < ctx.quiet_ops:
            if quiet_able:
                return Placement(Position.QUIET)
            raise _diverges(ctx, NonDeterminismError(
                f"run {ctx.run_id}: after sequence {ctx.next_seq - 1} the run recorded {ctx.quiet_ops} idle "
                f"poll/sleep operation(s), but step {name!r} was called after {ctx.quiet_count}",
                seq=ctx.next_seq, recorded=None, called=name,
            ))
        if ctx.quiet_count == ctx.quiet_ops and ctx.quiet_wake_at is not None:
            if is_sleep:
                if ctx.check_only:  # the history ends in the sleep that was in flight
                    raise HistoryEnded(ctx.next_seq, name)
                return Placement(Position.IN_FLIGHT_SLEEP)
            raise _diverges(ctx, NonDeterminismError(
                f"run {ctx.run_id}: after sequence {ctx.next_seq - 1} the run was sleeping, but the "
                f"workflow called {name!r} instead", seq=ctx.next_seq, recorded=None, called=name,
            ))
    if ctx.check_only:
        raise HistoryEnded(ctx.next_seq, name)
    return _LIVE


def _diverges(ctx: RunContext, exc: NonDeterminismError) -> NonDeterminismError:
    """``exc``, kept as the execution's first divergence: a workflow whose ``except Exception``
    swallows it still diverges (a replay-only check reports it, a gateway holds the run on it:
    :mod:`~exchange._engine.execution.code_hold`)."""
    if ctx.divergence is None:
        ctx.divergence = exc
    return exc


def finish_quiet(ctx: RunContext, *, durable: bool) -> None:
    """A quiet operation answered; ``durable`` when its answer is already in the record (replayed,
    or a sleep whose wake-up time the tail holds)."""
    ctx.quiet_count += 1
    if durable:
        ctx.quiet_durable = ctx.quiet_count


def finish_in_flight_sleep(ctx: RunContext) -> None:
    """The tail's sleep is done: from here on the run is live."""
    ctx.quiet_wake_at = None
    ctx.quiet_ops = None
    finish_quiet(ctx, durable=True)


def advance(ctx: RunContext, seq: int) -> None:
    """A step at ``seq`` was recorded or replayed: the next call takes ``seq + 1``."""
    ctx.next_seq = seq + 1
    ctx.quiet_count = 0
    ctx.quiet_durable = 0


def error_type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def encode_error(exc: BaseException) -> bytes | None:
    """The pickled exception when it survives a round trip, so replay raises the same class."""
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
    except Exception:
        return None
    return base64.b64encode(blob)


def rebuild_error(rec: StepRecord) -> BaseException:
    if rec.error_blob:
        try:
            exc = pickle.loads(base64.b64decode(rec.error_blob))
            if isinstance(exc, BaseException):
                return exc
        except Exception:
            pass
    return RecordedStepError(rec.error_type or "Error", rec.error_message or "")
