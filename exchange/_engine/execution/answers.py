"""Recorded answers: an in-run operation replays the answer its run recorded, or produces one and
records it.

Every in-run operation whose answer steers the run (``recv``, ``recvCommand``, ``operator.prompt``,
``now``, ``startChild``, ``waitFor``, ``writeStream``, ``getEvent``, ``getEventHistory``,
``readStream``) is one call of :func:`replay_or_record`: where the call stands in the recorded
history (:func:`~exchange._engine.execution.replay.place`) decides whether the producer runs at all.
``sleep_chunked`` (no answer, a wake-up time) and ``patched`` (whose *missing* marker is an answer)
place themselves; ``patched`` records its marker with :func:`record_answer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from exchange._engine.execution import replay
from exchange._engine.execution.context import RunContext
from exchange._store import STEP_SUCCESS, MessageRecord, NewEvent, StepRecord, codec


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


QUIET: Final = _Marker("QUIET")
"""What a producer returns when it got nothing: the operation is quiet (no step row)."""

_NOT_QUIET_ABLE: Final = _Marker("NOT_QUIET_ABLE")


@dataclass(frozen=True, slots=True)
class Receipt:
    """An answer that commits more than its step row: the messages it ``consumed`` (each with its
    ``outcomes`` entry, default CONSUMED) and the ``events`` it logs, all in the step's commit."""

    output: Any
    consumed: Sequence[MessageRecord] = ()
    events: Sequence[NewEvent] = ()
    outcomes: Mapping[int, tuple[str, str | None]] | None = None


def replay_or_record(ctx: RunContext, name: str, produce: Callable[..., Any], *args: Any,
                     quiet_answer: Any = _NOT_QUIET_ABLE) -> Any:
    """The answer of the in-run operation ``name`` at the run's current position.

    - **Recorded**: the history holds step ``name`` here: answers its recorded output (decoded)
      and moves past it; ``produce`` is not called, nothing is read or written.
    - **Quiet** (only when ``quiet_answer`` is given, which makes the operation quiet-able): the
      history holds a quiet operation here (a receive or read that got nothing): answers
      ``quiet_answer``, counted as a durable quiet answer; ``produce`` is not called.
    - **Live** (past the history): calls ``produce(*args)`` once, at this position (``ctx.next_seq`` is
      the sequence number its step will take). It returns :data:`QUIET` (quiet-able operations
      only): nothing is recorded, the answer is ``quiet_answer``, counted as a quiet answer not yet
      durable (the context writes it before the run's next side effect). It returns a
      :class:`Receipt` or any other JSON value: step ``name`` (SUCCESS, the answer as output) is
      recorded in one commit with what the receipt consumes and logs (:func:`record_answer`); the answer
      is the output as stored (encoded and decoded, so a replay answers the very same).
    - **Divergent**: the history holds something else here (another step, or quiet operations
      where this one is not quiet-able): :class:`~exchange.errors.NonDeterminismError` from
      :func:`~exchange._engine.execution.replay.place`, before ``produce`` is called.

    The store round trips are the producer's own and, live and not quiet, the one commit of
    :func:`record_answer`; answering from the record costs none.
    """
    quiet_able = quiet_answer is not _NOT_QUIET_ABLE
    placement = replay.place(ctx, name, quiet_able=quiet_able)
    if placement.position is replay.Position.RECORDED:
        assert placement.record is not None
        replay.advance(ctx, placement.record.seq)
        return codec.loads(placement.record.output)
    if placement.position is replay.Position.QUIET:
        replay.finish_quiet(ctx, durable=True)
        return quiet_answer
    # ``produce`` and its arguments rather than a closure: a run waits inside the producer, and
    # every frame on a waiting thread's stack counts (a stack past CPython's 16 KiB data-stack
    # chunk costs another 4 KiB per thread: 4 MB for 1,000 waiting runs, bench/scale.py).
    answer = produce(*args)
    if answer is QUIET:
        if not quiet_able:
            raise AssertionError(f"in-run operation {name!r} is not quiet-able but its producer answered QUIET")
        replay.finish_quiet(ctx, durable=False)
        return quiet_answer
    if isinstance(answer, Receipt):
        return record_answer(ctx, name, answer.output, answer.consumed, answer.events, answer.outcomes)
    return record_answer(ctx, name, answer)


def record_answer(ctx: RunContext, name: str, output: Any, consumed: Sequence[MessageRecord] = (),
                  events: Sequence[NewEvent] = (), outcomes: Mapping[int, tuple[str, str | None]] | None = None) -> Any:
    """Record step ``name`` (SUCCESS) answering ``output`` at the current position, consuming
    ``consumed`` (each with its ``outcomes`` entry, default CONSUMED) and logging ``events``, in
    one commit, and move past it; returns the answer as stored."""
    seq = ctx.next_seq
    now = ctx.store.clock.now()
    text = codec.dumps(output)
    ctx.store.record_step_with_events(
        ctx.fence,
        StepRecord(seq=seq, name=name, status=STEP_SUCCESS, attempts=1, output=text,
                   skipped_ops=ctx.quiet_count, started_at=now, finished_at=now),
        replace=False,
        consumed_ids=[m.id for m in consumed],
        new_events=events,
        outcomes=outcomes,
    )
    replay.advance(ctx, seq)
    return codec.loads(text)
