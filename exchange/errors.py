"""Every error Exchange raises, in one flat module.

The tree::

    ExchangeError                       base of every error below (RunControl is not an error)
    ├── ConfigError                     a config file, value or ${VAR} that cannot be used
    ├── StoreError                      the system store cannot be reached, opened or migrated (an outage)
    │   └── StoreDiskFull               the store's disk is full (or refused the write): runs pause, not fail
    ├── WorkflowError
    │   ├── StoreDataError              a value the store cannot hold (NUL byte, too long, out of range)
    │   ├── UnknownWorkflow             no workflow registered under that name
    │   ├── DuplicateWorkflow           two modules register one name
    │   ├── InvalidParams               parameters that do not fit the workflow's signature or are not JSON
    │   ├── UnknownRun                  no run with that id (or id prefix)
    │   ├── AmbiguousRun                a run id prefix that several runs' ids start with
    │   ├── UnknownCommand              a mailbox command name outside the command set
    │   ├── UnknownTemplate             no parameter template (or version) of that name
    │   ├── CommandRefused              sendCommand(strict=True): the run's state will not accept it
    │   ├── NonDeterminismError         replay met a different step than the one recorded
    │   ├── StepOutputError             a step returned something that cannot be stored as JSON
    │   ├── OutsideRunError             a run-only call (checkCancelled, progress, ...) made outside a run
    │   ├── OperationInStepError        an in-run operation (recvCommand, recv, sleep_chunked) inside a step
    │   ├── RecordedStepError           replay re-raises a recorded error whose class cannot be rebuilt
    │   ├── InvalidAnswer               a prompt's answer that breaks a field (``field`` names it); still open
    │   ├── PromptNotOpen               the prompt is not open (answered, verified, timed out, run finished)
    │   ├── PromptTimeout               ``operator.prompt`` was not answered within its ``timeout_s``
    │   └── UnitTimeout                 ``units.acquire`` was not granted within its ``timeout_s``
    ├── AccessError                     a user, role, password or token that cannot be used (API, console)
    │   ├── NotAllowed                  the caller's role (or who they are) does not allow the action
    │   ├── UnknownUser                 no user or token of that name
    │   └── SignInRefused               a wrong user or password, or too many attempts (``retry_after_seconds``)
    ├── StopRequested                   the operator sent STOP (``control.checkpoint``): shut down and end
    │   └── AbortRequested              the operator sent ABORT: the harder stop, caught by ``except StopRequested``
    ├── StepError                       the classification a step's failure carries for the retry policy
    │   ├── RetryableError              transient: retry under the step's options (retry_after overrides)
    │   │   └── CommunicationError      a device, database or service could not be reached
    │   │       └── AnswerLost          a request went out but its answer did not come back: in doubt
    │   │   └── HttpRetryableStatus     an HTTP service answered 408, 429 or 5xx (``status``, ``retry_after``)
    │   └── FatalError                  permanent: never retried
    │       ├── InvalidArgument         an argument of a step or API call refused before any side effect
    │       │   ├── HttpArgumentError   an http argument (also an HttpRequestError)
    │       │   ├── SqlArgumentError    a db argument (also a DatabaseError)
    │       │   └── UnknownDatabase     no [databases.NAME] of that name (also a DatabaseError)
    │       ├── TagError                a tag operation refused before anything was sent
    │       │   ├── TagPathError        malformed tag path
    │       │   ├── UnknownTag          path not in the tag table
    │       │   ├── UnknownDevice       device not in the config
    │       │   ├── ReadOnlyTag         write to an "ro" tag
    │       │   ├── TagTypeError        value cannot be converted to the tag's data type
    │       │   └── TagRangeError       value outside the data type or the tag's min/max
    │       ├── ConfirmTimeout          write_confirm / until_tag_equals did not see the value in time
    │       ├── WriteInDoubt            a write that may have been applied, on a tag that is never resent
    │       ├── DeviceError             the device answered with an error (Modbus exception, Bad status)
    │       ├── DatabaseError           the database rejected the statement (its own message kept)
    │       ├── HttpRequestError        an HTTP request that cannot be made as given (method, URL, TLS)
    │       ├── HttpStatusError         a 4xx that retrying will not fix (``status``)
    │       ├── OutputTooLarge          a step output above the configured size limit
    │       └── PhaseError              an equipment phase (``phase.run``) did not end Complete
    │           ├── PhaseStopped        the phase went Stopped (an operator's STOP, or the PLC's own)
    │           ├── PhaseAborted        the phase went Aborted (an operator's ABORT, or the PLC's own)
    │           ├── PhaseOwnedElsewhere its owner tag names another batch system: nothing was written
    │           └── PhaseTimeout        the phase did not reach a state in time (Start, a command, the call)
    RunControl (BaseException)          the engine's control flow; not caught by ``except Exception``
    ├── Cancelled                       the run was cancelled or timed out: it ends CANCELLED
    └── RunInterrupted                  this execution of the run stops here without finishing the run
        ├── StoreLost                   the store failed under the run: it is executed again (by replay) later
        ├── OwnershipLost               this execution no longer owns the run (lease lost, taken over)
        └── Suspended                   the gateway is shutting down: the run resumes on the next start

The BaseExceptions end the workflow body where they are raised: a step's or a workflow's ``except
Exception`` cannot swallow them, so a run never carries on past a point the engine could not record.

Library errors are translated at the boundary where they occur with ``raise ... from exc`` so the
original stays in ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "AbortRequested",
    "AccessError",
    "AmbiguousRun",
    "AnswerLost",
    "Cancelled",
    "CommandRefused",
    "CommunicationError",
    "ConfigError",
    "ConfirmTimeout",
    "DatabaseError",
    "DeviceError",
    "DuplicateWorkflow",
    "ExchangeError",
    "FatalError",
    "HttpArgumentError",
    "HttpRequestError",
    "HttpRetryableStatus",
    "HttpStatusError",
    "InvalidAnswer",
    "InvalidArgument",
    "InvalidParams",
    "NonDeterminismError",
    "NotAllowed",
    "OperationInStepError",
    "OutputTooLarge",
    "OutsideRunError",
    "OwnershipLost",
    "PhaseAborted",
    "PhaseError",
    "PhaseOwnedElsewhere",
    "PhaseStopped",
    "PhaseTimeout",
    "PromptNotOpen",
    "PromptTimeout",
    "ReadOnlyTag",
    "RecordedStepError",
    "RetryableError",
    "RunControl",
    "RunInterrupted",
    "SignInRefused",
    "SqlArgumentError",
    "StepError",
    "StepOutputError",
    "StoreDataError",
    "StoreDiskFull",
    "StoreError",
    "StopRequested",
    "StoreLost",
    "Suspended",
    "TagError",
    "TagPathError",
    "TagRangeError",
    "TagTypeError",
    "UnknownCommand",
    "UnknownDatabase",
    "UnknownDevice",
    "UnknownRun",
    "UnknownTag",
    "UnknownTemplate",
    "UnknownUser",
    "UnitTimeout",
    "UnknownWorkflow",
    "WorkflowError",
    "WriteInDoubt",
]


class ExchangeError(Exception):
    """Base class of every error Exchange raises on purpose."""


class ConfigError(ExchangeError):
    """The configuration cannot be used; the message names the file, key or variable."""


class StoreError(ExchangeError):
    """The system store cannot be opened, migrated or written."""


class StoreDiskFull(StoreError):
    """The store's disk is full: a write was refused for want of space (SQLite ``SQLITE_FULL``,
    PostgreSQL ``53100 disk_full``, "No space left on device"). An outage, not bad data: nothing of
    the refused write is stored, runs stop where they are and are executed again by replay once the
    store takes writes again. The message starts with "the store's disk is full"."""


class WorkflowError(ExchangeError):
    """A workflow, run or command cannot be resolved or executed as asked."""


class StoreDataError(WorkflowError):
    """The store refused a value as data (not an outage): a NUL byte in text, a text longer than its
    column, a number out of range, a string that cannot be encoded. The message names the value's
    place; retrying cannot help, so the call fails instead of being replayed."""


class UnknownWorkflow(WorkflowError):
    def __init__(self, name: str, known: list[str] | None = None) -> None:
        hint = f" (registered: {', '.join(sorted(known))})" if known else ""
        super().__init__(f"unknown workflow {name!r}{hint}")
        self.name = name


class DuplicateWorkflow(WorkflowError):
    def __init__(self, name: str, first_module: str, second_module: str) -> None:
        super().__init__(
            f"workflow {name!r} is registered twice: in {first_module} and in {second_module}"
        )
        self.name = name


class InvalidParams(WorkflowError):
    """Parameters that do not bind to the workflow function or are not JSON."""


class UnknownRun(WorkflowError):
    """No run has the id ``run_id``; ``detail``, when given, says why the id could not name one."""

    def __init__(self, run_id: str, detail: str | None = None) -> None:
        super().__init__(f"unknown run {run_id!r}" + (f": {detail}" if detail else ""))
        self.run_id = run_id


class AmbiguousRun(WorkflowError):
    """A run id prefix (see :meth:`~exchange._engine.operator.runtime.Runtime.get_run`) that several
    runs' ids start with. ``candidates``: some of them as ``(id, workflow, status)``; ``count``: how
    many there are."""

    def __init__(self, prefix: str, candidates: Sequence[tuple[str, str, str]], count: int) -> None:
        shown = ", ".join(f"{run_id} ({workflow} {status})" for run_id, workflow, status in candidates)
        more = f" and {count - len(candidates)} more" if count > len(candidates) else ""
        super().__init__(
            f"run id prefix {prefix!r} is ambiguous: {count} runs start with it: {shown}{more}; give more characters"
        )
        self.prefix = prefix
        self.candidates = list(candidates)
        self.count = count


class UnknownCommand(WorkflowError):
    def __init__(self, command: object, known: tuple[str, ...]) -> None:
        super().__init__(f"unknown command {command!r} (known: {', '.join(known)})")
        self.command = command


class UnknownTemplate(WorkflowError):
    """No parameter template of that name (or no such version of it, or none active)."""


class CommandRefused(WorkflowError):
    """``sendCommand(..., strict=True)`` (``exchange send --strict``): the run's status or ISA-88 state
    will not accept the command, so nothing was sent. ``problem`` says why."""

    def __init__(self, run_id: str, command: str, problem: str) -> None:
        super().__init__(f"run {run_id} will not accept {command}: {problem}; nothing sent")
        self.run_id = run_id
        self.command = command
        self.problem = problem


class NonDeterminismError(WorkflowError):
    """Replay met a call that differs from what the run recorded at that sequence number.

    ``seq`` the sequence number, ``recorded`` the step the history holds there (None: idle polls or
    a sleep were recorded there), ``called`` what the workflow called instead (None when not said);
    ``arguments`` the types of the arguments of that call when it is a step (``(str, int)``), as a
    replay-only check reports them."""

    def __init__(self, message: str, *, seq: int | None = None, recorded: str | None = None,
                 called: str | None = None) -> None:
        super().__init__(message)
        self.seq = seq
        self.recorded = recorded
        self.called = called
        self.arguments: str | None = None


class StepOutputError(WorkflowError):
    """A step returned a value that cannot be stored as JSON."""


class OutsideRunError(WorkflowError):
    """A call that only makes sense inside a workflow run was made outside one."""


class OperationInStepError(WorkflowError):
    """An in-run operation that steers the workflow (``recvCommand``, ``recv``, ``sleep_chunked``) was
    called inside a step's body. Only the step's outcome is recorded, so such an operation inside it
    could not be replayed; call it in the workflow body, between steps."""

    def __init__(self, operation: str, step: str, seq: int) -> None:
        super().__init__(
            f"{operation}() was called inside step {step!r} (sequence {seq}); it belongs to the workflow "
            f"body: call it between steps, not inside one"
        )
        self.operation = operation
        self.step = step


class RecordedStepError(WorkflowError):
    """Replay of a recorded step error whose original class could not be rebuilt."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


class InvalidAnswer(WorkflowError):
    """An answer to an operator prompt that breaks one of its fields (type, min/max, choices,
    pattern, required, what text may hold) or names no field: ``field`` (None when the answer is
    not a dict at all), its ``label`` if it has one, and ``problem``. Nothing is stored; the prompt
    stays open."""

    def __init__(self, field: str | None, problem: str, label: str | None = None) -> None:
        named = "" if field is None else f"field {field!r}" + (f" ({label})" if label else "") + ": "
        super().__init__(named + problem)
        self.field = field
        self.label = label
        self.problem = problem


class PromptNotOpen(WorkflowError):
    """The prompt cannot take an answer (or a verification) now: it does not exist, was answered
    already, waits for verification, timed out, or its run finished. ``status`` says which (None:
    no such prompt)."""

    def __init__(self, run_id: str, key: str, status: str | None, detail: str) -> None:
        super().__init__(f"run {run_id}: prompt {key!r} {detail}")
        self.run_id = run_id
        self.key = key
        self.status = status


class PromptTimeout(WorkflowError):
    """``operator.prompt(..., timeout_s=...)`` was not answered in time; the prompt is closed."""

    def __init__(self, key: str, timeout_s: float) -> None:
        super().__init__(f"prompt {key!r} was not answered within {timeout_s:g} s")
        self.key = key
        self.timeout_s = timeout_s

    def __reduce__(self) -> tuple[Any, ...]:
        return (PromptTimeout, (self.key, self.timeout_s))


class UnitTimeout(WorkflowError):
    """``units.acquire`` was not granted within its ``timeout_s``: its request is withdrawn, nothing is
    held. ``units`` names what was asked for, ``timeout_s`` how long it waited."""

    def __init__(self, units: list[str], timeout_s: float) -> None:
        super().__init__(f"units.acquire: {', '.join(units)} not granted within {timeout_s:g} s")
        self.units = units
        self.timeout_s = timeout_s

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.units, self.timeout_s)


class AccessError(ExchangeError):
    """A user, role, password or token that cannot be used; the message names what is wrong."""


class NotAllowed(AccessError):
    """The caller may not do this: their role is below the one needed (an operator prompt's
    ``role`` or ``verify_role``), or they are the wrong person (who answered a prompt cannot verify
    it). The HTTP API answers 403."""


class UnknownUser(AccessError):
    """No user (or API token) of that name."""

    def __init__(self, name: str, noun: str = "user") -> None:
        super().__init__(f"no {noun} named {name!r}")
        self.name = name


class SignInRefused(AccessError):
    """A sign-in refused: wrong user name or password (never saying which), or too many failed
    attempts, in which case ``retry_after_seconds`` says when to try again."""

    def __init__(self, message: str, retry_after_seconds: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class StopRequested(ExchangeError):
    """The operator sent STOP. Raised in the workflow body by
    :func:`exchange.workflows.steps.control.checkpoint` so the workflow can shut the plant down and
    end; ``command`` is the received command (``{"cmd", "reason", "actor", ...}``). Not caught, it
    ends the run in ERROR."""

    command_name: ClassVar[str] = "STOP"  # the command named in the message

    def __init__(self, command: dict[str, Any]) -> None:
        actor, reason = command.get("actor"), command.get("reason")
        super().__init__(self.command_name + (f" from {actor}" if actor else "") + (f": {reason}" if reason else ""))
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from the command, not the message (a recorded error replays as the same class).
        return type(self), (self.command,)


class AbortRequested(StopRequested):
    """The operator sent ABORT, the harder stop (ISA-88 Abort: end now, no orderly shutdown). A
    StopRequested too, so ``except StopRequested`` catches both; catch AbortRequested first where an
    abort must be told apart (skip the orderly shutdown, report ABORTED). ``command`` is the
    received command."""

    command_name: ClassVar[str] = "ABORT"


class StepError(ExchangeError):
    """Base of the two classifications a step failure can carry."""


class RetryableError(StepError):
    """A transient failure: the step is retried under its retry options.

    ``retry_after`` (seconds) overrides the computed backoff for the next attempt, e.g. an HTTP
    Retry-After header.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.retry_after))


class CommunicationError(RetryableError):
    """A device, database or service could not be reached; names what could not be reached."""


class AnswerLost(CommunicationError):
    """The request was sent but its answer was lost (timeout, connection broken mid-request): a write
    may or may not have been applied. The tag layer resolves it by the tag's ``on_doubt`` policy and
    never resends it blindly."""


class FatalError(StepError):
    """A permanent failure: the step is not retried and the error reaches the workflow."""


class InvalidArgument(FatalError):
    """An argument of a step or a runtime call that cannot be used (wrong type, not finite, out of
    range, too large). Raised before any side effect; the message names the call and the parameter."""


class TagError(FatalError):
    """A tag operation refused before anything was sent to a device."""


class TagPathError(TagError):
    pass


class UnknownTag(TagError):
    pass


class UnknownDevice(TagError):
    pass


class ReadOnlyTag(TagError):
    pass


class TagTypeError(TagError):
    pass


class TagRangeError(TagError):
    pass


class ConfirmTimeout(FatalError):
    """A confirm or wait did not see the value in time (the write, if any, was sent)."""


class WriteInDoubt(FatalError):
    """A write whose answer was lost, on a tag whose ``on_doubt`` is ``"fail"`` (a command or pulse
    bit): it may have been applied, so it is never resent; the audit trail marks it."""


class PhaseError(FatalError):
    """An equipment phase commanded by ``phase.run`` did not end Complete. ``phase`` names it
    (``"R1/Charge"``), ``state`` is the state name the PLC reported last (``"STOPPED"``), or None."""

    def __init__(self, message: str, phase: str | None = None, state: str | None = None) -> None:
        super().__init__(message)
        self.phase = phase
        self.state = state


class PhaseStopped(PhaseError):
    """The phase went Stopped: an operator's STOP reached it, or the PLC stopped it by itself."""


class PhaseAborted(PhaseError):
    """The phase went Aborted: an operator's ABORT reached it, or the PLC aborted it by itself."""


class PhaseOwnedElsewhere(PhaseError):
    """The phase's owner tag holds another batch system's id: nothing was written to the phase."""


class PhaseTimeout(PhaseError):
    """The phase did not reach the state asked of it in time: left Idle after Start
    (``start_timeout_s``), answered a command (``command_timeout_s``), completed (``timeout_s``)."""


class DeviceError(FatalError):
    """The device answered with an error; the message names device, address and the device's code."""


class DatabaseError(FatalError):
    """The database rejected a statement; the message names the connection and keeps the DB's text."""


class HttpStatusError(FatalError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.status))


class OutputTooLarge(FatalError):
    pass


class HttpRequestError(FatalError):
    """The request cannot be made as given (bad method, URL, arguments, or TLS verification failed)."""


class HttpArgumentError(HttpRequestError, InvalidArgument):
    """An argument of an HTTP call refused before anything was sent; the message names the
    parameter. An InvalidArgument (never retried) and an HttpRequestError."""


class HttpRetryableStatus(RetryableError):
    """The service answered 408, 429 or 5xx: worth retrying, after ``retry_after`` when it said so."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.status, self.retry_after))


class SqlArgumentError(DatabaseError, InvalidArgument):
    """An argument of ``query``/``update``/``transaction`` refused before a connection is checked
    out; the message names the connection and the parameter. Fatal: never retried."""


class UnknownDatabase(DatabaseError, InvalidArgument):
    """No ``[databases.NAME]`` with that name; the message lists the configured ones."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        hint = f"configured: {', '.join(sorted(known))}" if known else "no [databases.*] tables are configured"
        super().__init__(f"unknown database connection {name!r} ({hint})")
        self.name = name
        self.known = list(known)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.known))


class RunControl(BaseException):
    """Base of the engine's control flow: a run's body stops where it is raised (cancelled,
    interrupted). Not an Exception, so a step's or a workflow's ``except Exception`` cannot swallow
    it; every one carries the ``run_id`` it stops."""

    run_id: str


class Cancelled(RunControl):
    """The run was cancelled (or passed its timeout). Raised by ``checkCancelled()`` and blocking steps.

    It derives from BaseException so that a step's ``except Exception`` does not swallow it.
    """

    def __init__(self, run_id: str, reason: str | None = None) -> None:
        super().__init__(f"run {run_id} cancelled" + (f": {reason}" if reason else ""))
        self.run_id = run_id
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_id, self.reason))


class RunInterrupted(RunControl):
    """This execution of a run stops where it is, without finishing the run (see the subclasses)."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class StoreLost(RunInterrupted):
    """The store could not record what the run just did (it is unreachable). The run is executed again
    by replay once the store answers; nothing recorded runs twice."""

    def __init__(self, run_id: str, cause: BaseException) -> None:
        super().__init__(run_id, f"run {run_id}: the store failed: {cause}")


class OwnershipLost(RunInterrupted):
    """This execution no longer owns the run: its lease ran out without being renewed, or another
    gateway took the run over. The refused write changed nothing; no further step starts here."""

    def __init__(self, run_id: str, why: str) -> None:
        super().__init__(run_id, f"run {run_id}: this execution no longer owns the run ({why})")
        self.why = why


class Suspended(RunInterrupted):
    """The gateway is shutting down: the run stops here and resumes on the next start."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id, f"run {run_id} suspended by gateway shutdown")
