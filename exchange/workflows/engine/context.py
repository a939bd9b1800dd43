"""The state of one executing run, bound to its worker thread.

Step-library code reaches it with :func:`current_run`; it gives the run id, the step being executed
(sequence number, name, attempt), cooperative cancellation (:meth:`RunContext.check_cancelled`,
:meth:`RunContext.sleep`) and the run's audit trail (:meth:`RunContext.record_event`).
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from exchange.errors import Cancelled, StoreError

if TYPE_CHECKING:
    from exchange.workflows.engine.runtime import Runtime
    from exchange.workflows.store.records import StepRecord

F = TypeVar("F", bound=Callable[..., Any])

_current: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("exchange_run", default=None)


class StoreLost(BaseException):
    """The store could not record what the run just did. The run stops here, untouched by any
    ``except Exception`` in workflow code, and is executed again (by replay) once the store answers."""

    def __init__(self, run_id: str, cause: StoreError) -> None:
        super().__init__(f"run {run_id}: the store failed: {cause}")
        self.run_id = run_id


def store_guard(fn: F) -> F:
    """Wrap a run-facing entry point (a step call, ``recvCommand``, ``sleep_chunked``, ...): inside a
    run, a StoreError becomes :class:`StoreLost`."""

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


class Suspended(BaseException):
    """The gateway is shutting down: the run stops here and resumes on the next start."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} suspended by gateway shutdown")
        self.run_id = run_id


@dataclass
class StepCall:
    """The step being executed right now in a run."""

    seq: int
    name: str
    attempt: int = 1


@dataclass
class RunContext:
    runtime: Runtime
    run_id: str
    workflow: str
    actor: str
    recorded: dict[int, StepRecord]
    deadline_at: float | None = None
    # Quiet operations (idle polls, finished sleeps) leave no step row: see engine/replay.py.
    quiet_after_seq: int | None = None
    quiet_ops: int | None = None
    quiet_wake_at: float | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    mail_event: threading.Event = field(default_factory=threading.Event)
    suspended: bool = False
    cancel_reason: str | None = None
    next_seq: int = 1
    quiet_count: int = 0
    step: StepCall | None = None
    state: str | None = None
    progress_pending: tuple[str, Any] | None = None
    progress_written_at: float = 0.0

    @property
    def frontier(self) -> int:
        """The highest recorded sequence number; calls up to it are replayed."""
        return max(self.recorded) if self.recorded else 0

    def replaying(self) -> bool:
        return self.next_seq <= self.frontier

    def cancel(self, reason: str | None) -> None:
        self.cancel_reason = reason
        self.cancel_event.set()
        self.mail_event.set()

    def suspend(self) -> None:
        """Stop at the next cancellation point without finishing the run (gateway shutdown)."""
        self.suspended = True
        self.cancel_event.set()
        self.mail_event.set()

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
        interval_seconds = self.runtime.config.engine.progress_interval_ms / 1000
        if waiting_seconds >= interval_seconds or time.monotonic() - self.progress_written_at >= interval_seconds:
            self.flush_progress()

    def flush_progress(self) -> None:
        """Write a throttled progress value now (before a step, a wait, or the end of the run)."""
        if self.progress_pending is None:
            return
        message, extra = self.progress_pending
        self.progress_pending = None
        self.progress_written_at = time.monotonic()
        self.runtime.store.write_progress(
            self.run_id,
            message,
            extra,
            history_max=self.runtime.config.engine.progress_history_max,
            step_seq=self.step.seq if self.step else None,
        )

    def check_cancelled(self) -> None:
        """Raise :class:`Cancelled` if the run was cancelled or passed its deadline."""
        if self.cancel_event.is_set():
            if self.suspended:
                raise Suspended(self.run_id)
            raise Cancelled(self.run_id, self.cancel_reason)
        if self.deadline_at is not None and time.time() >= self.deadline_at:
            self.cancel_reason = "timeout"
            self.cancel_event.set()
            raise Cancelled(self.run_id, "timeout")

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; raise :class:`Cancelled` as soon as the run is cancelled."""
        self.check_cancelled()
        if seconds <= 0:
            return
        if self.deadline_at is not None:
            seconds = min(seconds, max(0.0, self.deadline_at - time.time()))
        self.cancel_event.wait(seconds)
        self.check_cancelled()

    def record_event(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Append an event to the run's audit trail, stamped with the current step."""
        self.runtime.store.events.add(
            self.run_id,
            kind,
            payload,
            actor=actor or self.actor,
            reason=reason,
            step_seq=self.step.seq if self.step else None,
        )


def current_run() -> RunContext | None:
    """The run executing on this thread, or None outside a run."""
    return _current.get()


def bind(ctx: RunContext | None) -> contextvars.Token[RunContext | None]:
    return _current.set(ctx)


def unbind(token: contextvars.Token[RunContext | None]) -> None:
    _current.reset(token)
