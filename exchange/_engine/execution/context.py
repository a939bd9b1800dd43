"""The state of one executing run, bound to its worker thread.

Step-library code reaches it with :func:`current_run`; it gives the run id, the step being executed
(sequence number, name, attempt), cooperative cancellation (:meth:`RunContext.check_cancelled`,
:meth:`RunContext.sleep`) and the run's audit trail (:meth:`RunContext.record_event`). Every write it
makes carries the execution's fence (:attr:`RunContext.fence`).

The audit trail names the run's actor (who created it) on what the run does; what it does because
of someone else (the valve ``on_hold`` closes after an operator's HOLD) also carries who caused it,
``caused_by``, and what, ``cause`` (:meth:`RunContext.caused_by`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from exchange._config import EngineConfig
from exchange._doorbell import Doorbell
from exchange._engine.execution.execution_lease import Lease
from exchange._store import STEP_STARTED, Fence, MessageRecord, NewEvent, StepRecord, Store, codec
from exchange.errors import (
    Cancelled,
    NonDeterminismError,
    OperationInStepError,
    OutsideRunError,
    StoreError,
    StoreLost,
    Suspended,
)

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger(__name__)

_current: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("exchange_run", default=None)


def store_guard(fn: F) -> F:
    """Wrap a run-facing entry point (a step call, ``recvCommand``, ``sleep_chunked``, ...): inside a
    run, a StoreError (the store is unreachable) becomes :class:`~exchange.errors.StoreLost`."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            ctx = _current.get()
            if ctx is None:
                raise
            raise StoreLost(ctx.run_id, exc) from exc

    return cast(F, guarded)


@dataclass
class StepCall:
    """The step being executed right now in a run."""

    seq: int
    name: str
    attempt: int = 1
    started_at: float = 0.0  # store clock, of the step's first attempt
    skipped_ops: int = 0
    row_exists: bool = False  # the step has a row (RETRYING or STARTED) that its outcome replaces
    # A previous execution of this step began a side effect and died before recording the outcome:
    # what it sent may or may not have reached the device (see RunContext.begin_side_effect).
    resumed_in_doubt: bool = False
    side_effect_marked: bool = False  # this attempt's STARTED row is written
    # Audit events of this attempt (a tag written, a write in doubt) not yet written: they commit with
    # the step's outcome, so a tag write costs two durable commits (the STARTED mark, the outcome).
    events: list[NewEvent] = field(default_factory=list)
    # What an earlier attempt noted of its progress (RunContext.note_step), found on its STARTED row
    # when the step resumes in doubt: how far a long step (a phase) had got. None: nothing noted.
    note: Any = None

    def take_events(self) -> list[NewEvent]:
        """The events waiting for the step's next record (and none left waiting)."""
        taken, self.events = self.events, []
        return taken


@dataclass
class RunContext:
    store: Store
    settings: EngineConfig
    lease: Lease
    run_id: str
    workflow: str
    actor: str
    recorded: dict[int, StepRecord]
    deadline_at: float | None = None  # store clock
    on_step_error: str = "raise"  # the workflow's: "hold" holds a failed step for an operator (execution/hold.py)
    # Quiet operations (idle polls, finished sleeps) leave no step row: see execution/replay.py.
    quiet_after_seq: int | None = None
    quiet_ops: int | None = None
    quiet_wake_at: float | None = None
    # Rung to stop the run at its next check (cancel, shutdown, a lost lease); the mail bell also
    # when messages may have arrived. Only the run's own thread waits on them.
    cancel_event: Doorbell = field(default_factory=Doorbell)
    mail_event: Doorbell = field(default_factory=Doorbell)
    # A gateway's mail watcher bumps mail_generation when messages arrive (for any topic); a wait on
    # a topic reads the mailbox only when the generation moved since that topic's last empty look
    # (mail_checked, per topic: a look at one topic says nothing about another). Without a watcher:
    # polls.
    mail_watched: bool = False
    mail_generation: int = 0
    mail_checked: dict[str, int] = field(default_factory=dict)
    suspended: bool = False
    cancel_reason: str | None = None
    # Cancelled by an operator or its deadline: the run ends CANCELLED even if its body caught the
    # Cancelled exception and returned (or raised something else) on the way out.
    cancel_requested: bool = False
    next_seq: int = 1
    quiet_count: int = 0
    # How many of the quiet operations since the last step are durable (replayed from the record, or
    # written in the run's tail): an answer that steers the run must be durable before a side effect.
    quiet_durable: int = 0
    step: StepCall | None = None
    state: str | None = None  # the ISA-88 state the workflow reports (replay included)
    state_written: str | None = None  # the state the run's row holds
    progress_pending: tuple[str, Any] | None = None
    progress_shown: tuple[str, Any] | None = None  # the last progress written by this execution
    progress_written_at: float = 0.0
    patches: dict[str, bool] = field(default_factory=dict)  # rt.patched answers of this execution
    # Who caused what the run does now, when it is not the run's own doing (see caused_by): the keys
    # the events recorded meanwhile carry beside the run's actor.
    cause: dict[str, Any] | None = None
    used_units: bool = False  # asked for units (units.acquire, replays too): its end releases what it holds
    # A replay-only execution (exchange check-replay, execution/replay_check.py): recorded answers
    # only; the first call past the history raises replay.HistoryEnded, and nothing is written.
    check_only: bool = False
    divergence: NonDeterminismError | None = None  # the first divergence from the history (replay._diverges)

    @property
    def fence(self) -> Fence:
        return self.lease.fence

    @property
    def frontier(self) -> int:
        """The highest recorded sequence number; calls up to it are replayed."""
        return max(self.recorded) if self.recorded else 0

    def replaying(self) -> bool:
        """Whether the run is still inside its recorded history (a replay-only execution always is:
        what it reports, publishes or logs is never written)."""
        return self.check_only or self.next_seq <= self.frontier

    def require_workflow_body(self, operation: str) -> None:
        """Refuse an in-run operation called inside a step's body (it could not be replayed there)."""
        if self.step is not None:
            raise OperationInStepError(operation, self.step.name, self.step.seq)

    # ----- stopping -------------------------------------------------------------------------------
    def cancel(self, reason: str | None) -> None:
        self.cancel_reason = reason
        self.cancel_requested = True
        self.cancel_event.ring()
        self.mail_event.ring()

    def suspend(self) -> None:
        """Stop at the next cancellation point without finishing the run (gateway shutdown)."""
        self.suspended = True
        self.cancel_event.ring()
        self.mail_event.ring()

    def mail_arrived(self) -> None:
        """New messages may be waiting for this run (from the watcher, or a send in this process)."""
        self.mail_generation += 1
        self.mail_event.ring()

    def lose_ownership(self, why: str) -> None:
        """The run is no longer this execution's: it stops at its next check, writing nothing more."""
        self.lease.lose(why)
        self.cancel_event.ring()
        self.mail_event.ring()

    def check_cancelled(self) -> None:
        """Raise if the run must stop here: OwnershipLost (the lease is lost), Suspended (gateway
        shutdown), Cancelled (cancelled, or past its deadline)."""
        lease = self.lease
        if lease.lost is not None:
            lease.check_not_lost()
        if self.cancel_event.is_set():
            if self.suspended:
                raise Suspended(self.run_id)
            raise Cancelled(self.run_id, self.cancel_reason)
        if self.deadline_at is not None and self.store.clock.now() >= self.deadline_at:
            self.cancel_reason = "timeout"
            self.cancel_requested = True
            self.cancel_event.ring()
            raise Cancelled(self.run_id, "timeout")

    def seconds_until_deadline(self) -> float | None:
        """How long the run may still run before its deadline cancels it (None: no deadline); a step
        waiting on its own bell bounds its waits by it, as :meth:`sleep` does."""
        if self.deadline_at is None:
            return None
        return max(0.0, self.store.clock.seconds_until(self.deadline_at))

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; raise as soon as the run must stop (see :meth:`check_cancelled`)."""
        self.check_cancelled()
        if seconds <= 0:
            return
        if self.deadline_at is not None:
            seconds = min(seconds, max(0.0, self.store.clock.seconds_until(self.deadline_at)))
        self.cancel_event.wait(seconds)  # a lost lease, a cancel or a stop sets the event
        self.check_cancelled()

    # ----- durable answers ------------------------------------------------------------------------
    def make_answers_durable(self) -> None:
        """Before a side effect: write the answers of quiet operations not yet durable (the run's
        tail), so a replay after a crash takes the branch this execution took."""
        if self.quiet_count <= self.quiet_durable:
            return
        self.lease.check_not_lost()
        self.store.runs.set_fields(
            self.fence, f"the answers of idle polls (after sequence {self.next_seq - 1}, {self.quiet_count})",
            quiet_after_seq=self.next_seq - 1, quiet_ops=self.quiet_count, quiet_wake_at=None,
        )
        self.quiet_durable = self.quiet_count

    def begin_side_effect(self) -> None:
        """Inside a step, right before its first irreversible side effect (a tag write is sent):
        commit a STARTED row for the attempt, once per attempt.

        If the process dies before the step's outcome is recorded, the execution that resumes the
        run finds the row and sets :attr:`StepCall.resumed_in_doubt`, so the step knows its side
        effect is in doubt and resolves it (reads back, or refuses to repeat it) instead of
        repeating it blindly. Outside a step this does nothing. An unreachable store raises
        StoreLost before anything is sent.
        """
        call = self.step
        if call is None or call.side_effect_marked:
            return
        self.lease.check_not_lost()
        rec = StepRecord(seq=call.seq, name=call.name, status=STEP_STARTED, attempts=call.attempt,
                         skipped_ops=call.skipped_ops, started_at=call.started_at)
        try:
            self.store.steps.record(self.fence, rec, replace=call.row_exists)
        except StoreError as exc:
            raise StoreLost(self.run_id, exc) from exc
        call.row_exists = True
        call.side_effect_marked = True

    def note_step(
        self,
        note: Any,
        *,
        consumed: Sequence[MessageRecord] = (),
        events: Sequence[NewEvent] = (),
        outcomes: Mapping[int, tuple[str, str | None]] | None = None,
        state: str | None = None,
        label: str = "",
    ) -> None:
        """Inside a step with a side effect that lasts (a phase the PLC runs), commit how far it has
        got: the attempt's STARTED row carries ``note`` (any JSON), in one commit with the events the
        attempt recorded so far, ``events``, the messages it ``consumed`` (commands it acted on, each
        with its ``outcomes`` entry) and, when given, the run's reported ``state`` (with a ``state``
        event). The row marks the side effect as begun (see :meth:`begin_side_effect`); an execution
        that resumes the step finds ``note`` in :attr:`StepCall.note`. ``label`` says what was noted in
        the write's name (fault-injection logs, errors). Outside a step: OutsideRunError.
        An unreachable store raises StoreLost; a command consumed elsewhere, OwnershipLost.
        """
        call = self.step
        if call is None:
            raise OutsideRunError("note_step is for the body of a step")
        self.lease.check_not_lost()
        new_events = [*call.take_events(), *events]
        run_fields: dict[str, Any] | None = None
        if state is not None:
            run_fields = {"state": state, "updated_at": self.store.clock.now()}
            new_events.append(NewEvent("state", self.with_cause({"state": state}), self.actor, None))
        rec = StepRecord(seq=call.seq, name=call.name, status=STEP_STARTED, attempts=call.attempt,
                         skipped_ops=call.skipped_ops, started_at=call.started_at, output=codec.dumps(note))
        try:
            self.store.record_step_with_events(self.fence, rec, replace=call.row_exists,
                                               consumed_ids=[m.id for m in consumed], new_events=new_events,
                                               run_fields=run_fields, outcomes=outcomes,
                                               label=f"the progress of step {call.name!r} (sequence {call.seq}, "
                                                     f"attempt {call.attempt}): {label}")
        except StoreError as exc:
            raise StoreLost(self.run_id, exc) from exc
        call.row_exists = call.side_effect_marked = True
        call.note = note
        if state is not None:
            self.state = self.state_written = state

    # ----- progress and events --------------------------------------------------------------------
    def set_progress(self, message: str, extra: Any) -> None:
        """Keep the latest progress; write it when the throttle interval has passed."""
        if self.replaying():
            return
        self.progress_pending = (message, extra)
        self.flush_progress_if_due()

    def flush_progress_if_due(self, waiting_seconds: float = 0.0) -> None:
        """Write pending progress if the throttle interval has passed, or if the run is about to
        wait longer than the interval (so operators never look at a stale line for long)."""
        if self.progress_pending is None:
            return
        interval_seconds = self.settings.progress_interval_ms / 1000
        if waiting_seconds >= interval_seconds or time.monotonic() - self.progress_written_at >= interval_seconds:
            self.flush_progress()

    def flush_progress(self) -> None:
        """Write a throttled progress value now (before a step, a wait, or the end of the run)."""
        if self.progress_pending is None:
            return
        message, extra = self.progress_pending
        self.progress_pending = None
        self.progress_shown = (message, extra)
        self.progress_written_at = time.monotonic()
        self.store.write_progress(
            self.fence,
            message,
            extra,
            history_max=self.settings.progress_history_max,
            step_seq=self.step.seq if self.step else None,
            label=f"progress (after sequence {self.next_seq - 1})",
        )

    @contextlib.contextmanager
    def caused_by(self, actor: Any, cause: dict[str, Any] | None = None) -> Iterator[None]:
        """While the block runs, what the run records (tag writes and method calls, the states it
        reports) carries ``caused_by``: ``actor`` (a command's sender; ``"exchange"`` for Exchange's
        own doing), and ``cause`` when given (``{"cmd", "message_id"}``), beside the run's actor.
        The block may nest; the outer cause is back after it."""
        before = self.cause
        self.cause = {"caused_by": actor} if cause is None else {"caused_by": actor, "cause": cause}
        try:
            yield
        finally:
            self.cause = before

    def with_cause(self, payload: dict[str, Any] | None) -> dict[str, Any] | None:
        """``payload`` with the current cause's keys added after its own (which keep their values)."""
        if self.cause is None:
            return payload
        given = payload or {}
        return {**given, **{key: value for key, value in self.cause.items() if key not in given}}

    def record_event(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Append an event to the run's audit trail, stamped with the current step.

        Inside a step the event commits with the step's outcome (its success, its error, its retry or
        its hold), or when the step ends any other way (a cancel, a lost lease: see
        :meth:`flush_step_events`); a crash before then loses it with the outcome, and the step is in
        doubt on recovery as its STARTED mark says. Outside a step it is written at once: an
        unreachable store raises StoreLost, never an error a step could record. While a cause is
        set (:meth:`caused_by`) the payload carries it.
        """
        payload = self.with_cause(payload)
        if self.step is not None:
            self.step.events.append(NewEvent(kind, payload, actor or self.actor, reason))
            return
        try:
            self.store.events.add_fenced(
                self.fence,
                kind,
                payload,
                actor=actor or self.actor,
                reason=reason,
                step_seq=self.step.seq if self.step else None,
            )
        except StoreError as exc:
            raise StoreLost(self.run_id, exc) from exc

    def flush_step_events(self, call: StepCall) -> None:
        """Write the events of ``call`` that no outcome took (the step ended without a record: a
        cancel, a stop): what was done on the wire stays in the audit trail. Best effort: a store
        that is away loses them with the step's outcome."""
        for kind, payload, actor, reason in call.take_events():
            try:
                self.store.events.add_fenced(self.fence, kind, payload, actor=actor, reason=reason, step_seq=call.seq)
            except Exception as exc:  # noqa: BLE001 - the step is ending already; its STARTED mark stays
                log.warning("run %s step %s: audit event %s not written: %s", self.run_id, call.name, kind, exc)


def current_run() -> RunContext | None:
    """The run executing on this thread, or None outside a run."""
    return _current.get()


def bind(ctx: RunContext | None) -> contextvars.Token[RunContext | None]:
    return _current.set(ctx)


def unbind(token: contextvars.Token[RunContext | None]) -> None:
    _current.reset(token)
