"""Rows of the system store as typed records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

# Run statuses, in their order of life (the text the store keeps and every surface shows).
RunStatus = Literal["ENQUEUED", "PENDING", "RUNNING", "SUCCESS", "ERROR", "CANCELLED"]
ENQUEUED: Final = "ENQUEUED"
PENDING: Final = "PENDING"
RUNNING: Final = "RUNNING"
SUCCESS: Final = "SUCCESS"
ERROR: Final = "ERROR"
CANCELLED: Final = "CANCELLED"
ACTIVE_STATUSES: tuple[RunStatus, ...] = (PENDING, RUNNING)
UNFINISHED_STATUSES: tuple[RunStatus, ...] = (ENQUEUED, PENDING, RUNNING)
FINAL_STATUSES: tuple[RunStatus, ...] = (SUCCESS, ERROR, CANCELLED)
ALL_STATUSES: tuple[RunStatus, ...] = (ENQUEUED, PENDING, RUNNING, SUCCESS, ERROR, CANCELLED)

# Step statuses (the text the store keeps).
StepStatus = Literal["SUCCESS", "ERROR", "RETRYING", "STARTED", "HELD", "HELD_IN_DOUBT"]
STEP_SUCCESS: Final = "SUCCESS"
STEP_ERROR: Final = "ERROR"
STEP_RETRYING: Final = "RETRYING"
# An attempt whose side effect (a tag write) started and whose outcome is not recorded yet: found on
# recovery, it means the side effect is in doubt (it may have happened before the crash).
STEP_STARTED: Final = "STARTED"
# A step of an ``on_step_error="hold"`` workflow that failed after its retries: it waits for an
# operator's RESUME (run it again) or STOP (raise its error). IN_DOUBT: the failure left a tag write
# in doubt, so the step runs again as resumed in doubt (see exchange/_engine/execution/hold.py).
STEP_HELD: Final = "HELD"
STEP_HELD_IN_DOUBT: Final = "HELD_IN_DOUBT"
HELD_STEP_STATUSES: tuple[StepStatus, ...] = (STEP_HELD, STEP_HELD_IN_DOUBT)
# The run row's error type while an unfinished run is held because its recorded history diverges
# from the workflow code loaded now (state HELD; see exchange/_engine/execution/code_hold.py).
CODE_HELD_ERROR: Final = "NonDeterminismError"


@dataclass(frozen=True)
class Fence:
    """Who may write to a run: the owner that holds it and the lease generation it was given.

    Every claim, recovery and takeover of a run gives it a new generation, so an execution that lost
    its run (paused past its lease, cut off from the store) holds a stale fence; every write it makes
    is conditioned on the fence in the same statement and is refused.
    """

    run_id: str
    owner: str
    generation: int


@dataclass
class StepRecord:
    seq: int
    name: str
    status: StepStatus
    attempts: int
    output: str | None = None  # JSON text
    error_type: str | None = None
    error_message: str | None = None
    error_blob: bytes | None = None
    skipped_ops: int = 0
    next_attempt_at: float | None = None
    started_at: float = 0.0
    finished_at: float | None = None
    # An ERROR row whose last attempt had begun its side effect (see schema.steps.side_effect).
    side_effect: bool = False

    @classmethod
    def from_row(cls, row: Any) -> StepRecord:
        return cls(
            seq=row.seq,
            name=row.name,
            status=row.status,
            attempts=row.attempts,
            output=row.output,
            error_type=row.error_type,
            error_message=row.error_message,
            error_blob=row.error_blob,
            skipped_ops=row.skipped_ops,
            next_attempt_at=row.next_attempt_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            side_effect=bool(row.side_effect),
        )


@dataclass
class RunRecord:
    id: str
    workflow: str
    status: RunStatus
    state: str | None
    params: str
    result: str | None
    error_type: str | None
    error_message: str | None
    queue: str
    partition_key: str | None
    priority: int
    dedup_id: str | None
    timeout_seconds: float | None
    deadline_at: float | None
    code_version: str
    progress: str | None
    progress_extra: str | None
    owner: str | None
    owner_node: str | None
    lease_generation: int
    lease_expires_at: float | None
    cancel_requested: int
    cancel_reason: str | None
    created_by: str
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    executions: int
    quiet_after_seq: int | None
    quiet_ops: int | None
    quiet_wake_at: float | None
    parent_run_id: str | None = None
    forked_from: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:
        return cls(**{name: getattr(row, name) for name in cls.__dataclass_fields__})

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    def fence(self) -> Fence:
        """The fence of the owner this record shows (the run must be owned)."""
        assert self.owner is not None, f"run {self.id} has no owner"
        return Fence(self.id, self.owner, self.lease_generation)


@dataclass
class MessageRecord:
    id: int
    run_id: str
    topic: str
    payload: str
    actor: str | None
    reason: str | None
    sent_at: float


# What became of a consumed mailbox message (``exchange_mailbox.outcome``).
MESSAGE_CONSUMED = "CONSUMED"  # the workflow received it
MESSAGE_DROPPED = "DROPPED"  # a receive took it and discarded it (not accepted, superseded, unknown)


@dataclass
class MessageFate:
    """A mailbox message and what became of it: unconsumed (``consumed_at`` None), or consumed by
    step ``consumed_seq`` with ``outcome`` CONSUMED or DROPPED (None: consumed before the store
    recorded outcomes) and ``outcome_note`` (why it was dropped, or the state that accepted it)."""

    id: int
    run_id: str
    topic: str
    payload: str
    sent_at: float
    consumed_seq: int | None
    consumed_at: float | None
    outcome: str | None
    outcome_note: str | None


class NewEvent(NamedTuple):
    """An event to append to a run's audit trail with a step's record (the record gives its run and
    step; the store its id and time). ``payload``: JSON-ready."""

    kind: str
    payload: Any
    actor: str | None
    reason: str | None


@dataclass
class EventRecord:
    id: int
    run_id: str
    kind: str
    at: float
    actor: str | None
    reason: str | None
    step_seq: int | None
    payload: str | None
