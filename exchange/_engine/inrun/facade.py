"""The object ``getWorkflows()`` returns: the runtime facade of the authoring API (camelCase, as in
Ignition).

Outside a run it offers ``start``, ``waitFor``, ``getRun``, ``listRuns``, ``sendCommand``, ``send``,
``cancel``, ``retry``, ``fork``, ``getEvent`` and the prompts' ``listPrompts``, ``answerPrompt``,
``verifyPrompt`` (see :class:`~exchange._engine.operator.runtime.Runtime` for what each refuses).
Inside a run it is bound to the run executing on the calling thread and adds ``checkCancelled``,
``isCancelled``, ``progress``, ``setState``, ``recvCommand``, ``recv``, ``setEvent``, ``runId``,
``patched`` and ``now`` (which outside a run is the plain current time).

The in-run operations check their arguments before anything is waited for, received or written, and
refuse a bad one with :class:`~exchange.errors.InvalidArgument` naming the operation and the
parameter: a timeout that is NaN, infinite, negative, a bool or a string; a topic, state or key that
is not a non-empty string the store can hold; a progress message that is not a string; a value that is
not JSON or is larger than ``engine.message_max_bytes``. Called outside a run they raise
:class:`~exchange.errors.OutsideRunError` first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Unpack

from exchange._arguments import checked_json, integer, number, optional_number, shown
from exchange._arguments import text as checked_text
from exchange._engine.execution import HistoryEnded, RunContext, current_run, store_guard
from exchange._engine.inrun import children, run_events, run_reads, streams, versioning
from exchange._engine.inrun import operations as inrun
from exchange._engine.model import COMMAND_TOPIC, PromptView, RunView
from exchange._engine.operator import (
    EVENT_KEY_MAX_CHARS,
    STATE_MAX_CHARS,
    TOPIC_MAX_CHARS,
    Runtime,
    StartKeywords,
    current_runtime,
)
from exchange._store import codec
from exchange.errors import Cancelled, InvalidArgument, OutsideRunError

__all__ = ["MAX_MESSAGES_LIMIT", "Workflows", "getWorkflows"]

MAX_MESSAGES_LIMIT = 1000  # recvCommand(maxMessages=...): commands drained in one call
PATCH_ID_MAX_CHARS = 100  # the marker step's name must fit the store's column
STREAM_READ_MAX = 10_000  # readStream / getEventHistory: values in one answer


class Workflows:
    """The object ``getWorkflows()`` returns."""

    # ----- anywhere ------------------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        return current_runtime()

    def _acting(self, call: str) -> Runtime:
        """The runtime, for a call that changes something outside the run (starts, sends, answers);
        a replay-only check (``exchange check-replay``) stops before it, doing nothing."""
        ctx = current_run()
        if ctx is not None and ctx.check_only:
            raise HistoryEnded(ctx.next_seq, call, "the workflow acts outside a step (not checked further)")
        return current_runtime()

    def start(self, name: str, params: dict[str, Any] | None = None, **options: Unpack[StartKeywords]) -> str:
        """Enqueue a run; see :meth:`Runtime.start` (InvalidParams, UnknownWorkflow)."""
        return self._acting("start").start(name, params, **options)

    @store_guard
    def waitFor(self, run_id: str, timeoutSeconds: float | None = None) -> RunView:
        """Wait for the run to finish; see :meth:`Runtime.wait_for` (InvalidArgument, UnknownRun).
        Inside a run the wait is a recorded step: a replay answers what it saw without waiting
        (see :mod:`exchange._engine.inrun.children`)."""
        runtime = self.runtime
        whole_id = runtime.checked_run_id("waitFor", run_id)  # errors name the facade's call
        timeout = optional_number("waitFor", "timeoutSeconds", timeoutSeconds, minimum=0)
        ctx = current_run()
        if ctx is None:
            return runtime.wait_for(whole_id, timeout)
        return children.wait_for(ctx, runtime, whole_id, timeout)

    def getRun(self, run_id: str) -> RunView:
        """The run dict (snake_case keys); ``run_id`` is the whole id or a unique prefix of at least
        4 characters; see :meth:`Runtime.get_run` (InvalidArgument, UnknownRun, AmbiguousRun)."""
        runtime = self.runtime
        return runtime.get_run(runtime.checked_run_id("getRun", run_id))

    def listRuns(
        self, status: str | None = None, limit: int = 100, *, workflow: str | None = None,
        state: str | None = None, since: Any = None, codeVersion: str | None = None,
    ) -> list[RunView]:
        """Runs, newest first, matching every filter given; see :meth:`Runtime.list_runs`."""
        return self.runtime.list_runs(status=status, workflow=workflow, limit=limit, state=state,
                                      code_version=codeVersion, since=since, call="listRuns")

    def sendCommand(self, run_id: str, cmd: str, reason: str | None = None, **kwargs: Any) -> int:
        """Post an operator command; see :meth:`Runtime.send_command`."""
        return self._acting("sendCommand").send_command(run_id, cmd, reason, **kwargs, call="sendCommand")

    def send(self, run_id: str, topic: str, message: Any) -> int:
        """Post a JSON message to a topic; see :meth:`Runtime.send`."""
        return self._acting("send").send(run_id, topic, message)

    def cancel(self, run_id: str, reason: str | None = None) -> str:
        """Ask an unfinished run to stop; see :meth:`Runtime.cancel` (a finished run: WorkflowError)."""
        return self._acting("cancel").cancel(run_id, reason)

    def listPrompts(self, run_id: str | None = None) -> list[PromptView]:
        """The operator prompts that wait for a person (open, or waiting for verification), oldest
        first; of one run if ``run_id`` is given. See :meth:`Runtime.open_prompts`."""
        return self.runtime.open_prompts(run_id=run_id)

    def answerPrompt(self, run_id: str, key: str, values: dict[str, Any], reason: str | None = None, *,
                     actor: str | None = None) -> PromptView:
        """Answer a run's open prompt (as ``exchange answer`` does: held to no role); returns the
        prompt afterwards. InvalidAnswer naming the field, PromptNotOpen, UnknownRun."""
        return self._acting("answerPrompt").answer_prompt(run_id, key, values, actor=actor, reason=reason)

    def verifyPrompt(self, run_id: str, key: str, reason: str | None = None, *, actor: str | None = None,
                     reject: bool = False) -> PromptView:
        """Verify (``reject``: send back) the answer of a prompt that waits for a second person;
        NotAllowed for the one who answered, PromptNotOpen, UnknownRun."""
        return self._acting("verifyPrompt").verify_prompt(run_id, key, actor=actor, reason=reason, reject=reject)

    def retry(self, run_id: str, reason: str | None = None) -> str:
        """Execute an ERROR or CANCELLED run again from where it stopped, under the same id (returned);
        see :meth:`Runtime.retry` (any other status: WorkflowError naming it, nothing changed)."""
        return self._acting("retry").retry(run_id, reason)

    def fork(self, run_id: str, from_step: int, reason: str | None = None) -> str:
        """Start a new run of the run's workflow and parameters whose steps before ``from_step`` are
        copied (replayed, not executed); returns its id. See :meth:`Runtime.fork`."""
        return self._acting("fork").fork(run_id, from_step, reason)

    @store_guard
    def readStream(self, run_id: str, key: str, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """The values run ``run_id`` wrote to stream ``key`` with ``writeStream``, oldest first, as
        ``{"seq", "value", "at"}``; only those with ``seq`` above ``after`` (page with the last
        ``seq`` seen), at most ``limit`` (1 to 10000). UnknownRun, InvalidArgument."""
        runtime = self.runtime
        whole_id = runtime.checked_run_id("readStream", run_id)
        checked_text("readStream", "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        after = integer("readStream", "after", after, minimum=0)
        limit = integer("readStream", "limit", limit, minimum=1, maximum=STREAM_READ_MAX)
        runtime.get_run(whole_id, steps=False, events=False)  # UnknownRun
        return run_reads.read_stream(runtime, _workflow_body(), whole_id, key, after, limit)

    @store_guard
    def getEventHistory(self, run_id: str, key: str, limit: int = 100) -> list[dict[str, Any]]:
        """Every value run ``run_id`` published under ``key`` with ``setEvent``, oldest first, as
        ``{"at", "value"}`` (the newest ``limit``, 1 to 10000). UnknownRun, InvalidArgument."""
        runtime = self.runtime
        whole_id = runtime.checked_run_id("getEventHistory", run_id)
        checked_text("getEventHistory", "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        limit = integer("getEventHistory", "limit", limit, minimum=1, maximum=STREAM_READ_MAX)
        runtime.get_run(whole_id, steps=False, events=False)  # UnknownRun
        return run_reads.event_history(runtime, _workflow_body(), whole_id, key, limit)

    @store_guard
    def getEvent(self, run_id: str, key: str, timeoutSeconds: float = 0.0) -> Any:
        """A value the run published with setEvent; see :meth:`Runtime.get_event`. Inside a run the
        answer is recorded: a replay gives it back without reading or waiting again (see
        :mod:`exchange._engine.inrun.run_reads`)."""
        runtime = self.runtime
        whole_id = runtime.checked_run_id("getEvent", run_id)  # errors name the facade's call
        checked_text("getEvent", "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        timeout = number("getEvent", "timeoutSeconds", timeoutSeconds, minimum=0)
        ctx = _workflow_body()
        if ctx is None:
            return runtime.get_event(whole_id, key, timeout)
        runtime.get_run(whole_id, steps=False, events=False)  # UnknownRun
        return run_reads.get_event(ctx, whole_id, key, timeout)

    # ----- inside a run --------------------------------------------------------------------------
    @staticmethod
    def _ctx(what: str) -> RunContext:
        ctx = current_run()
        if ctx is None:
            raise OutsideRunError(f"{what}() can only be called inside a workflow run")
        return ctx

    @property
    def runId(self) -> str:
        return self._ctx("runId").run_id

    def checkCancelled(self) -> None:
        """Raise Cancelled (not an Exception: ``except Exception`` does not catch it) if cancelled."""
        self._ctx("checkCancelled").check_cancelled()

    def isCancelled(self) -> bool:
        try:
            self._ctx("isCancelled").check_cancelled()
        except Cancelled:
            return True
        return False

    @store_guard
    def progress(self, message: str, extra: Any = None) -> None:
        """Report progress: the run keeps the latest value and a history; writes are throttled.

        ``message`` a str and ``extra`` None or a JSON value, each at most
        ``engine.message_max_bytes`` (UTF-8 / as JSON); InvalidArgument otherwise."""
        ctx = self._ctx("progress")
        limit = ctx.settings.message_max_bytes
        if not isinstance(message, str):
            raise InvalidArgument(f"progress: message must be a string, got {shown(message)}")
        size = len(message.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidArgument(
                f"progress: message is {size} bytes long; the limit is {limit} (engine.message_max_bytes)"
            )
        if extra is not None:
            checked_json("progress", "extra", extra, encode=codec.dumps, max_bytes=limit, setting="message_max_bytes")
        ctx.set_progress(message, extra)

    @store_guard
    def setState(self, state: str) -> None:
        """Report the run's ISA-88 state (STARTING, RUNNING, HELD, ...) without receiving commands:
        nothing waiting in the mailbox is consumed or dropped. ``recvCommand()`` without a
        ``currentState`` judges commands in this state. ``state``: a non-empty string of at most
        32 characters (InvalidArgument otherwise)."""
        ctx = self._ctx("setState")
        inrun.set_state(ctx, checked_text("setState", "state", state, max_chars=STATE_MAX_CHARS))

    @store_guard
    def recvCommand(
        self,
        currentState: str | None = None,
        topic: str = COMMAND_TOPIC,
        timeoutSeconds: float = 0.0,
        maxMessages: int = 8,
    ) -> dict[str, Any] | None:
        """Take up to ``maxMessages`` commands; return the highest-priority one allowed in
        ``currentState`` (``{cmd, reason, actor, sent_at, ...}``) or None. ``currentState`` (default:
        the state last reported, else RUNNING) becomes the run's reported state; the commands taken
        before the returned one that lose (not allowed in it, superseded) are dropped and recorded
        as events, those sent after it stay in the mailbox for the next call (the operator's order).

        ``timeoutSeconds`` a finite number >= 0, ``maxMessages`` a whole number from 1 to
        :data:`MAX_MESSAGES_LIMIT`, ``topic`` and ``currentState`` non-empty strings; InvalidArgument
        otherwise, before anything is received."""
        ctx = self._ctx("recvCommand")
        call = "recvCommand"
        if currentState is not None:
            checked_text(call, "currentState", currentState, max_chars=STATE_MAX_CHARS)
        checked_text(call, "topic", topic, max_chars=TOPIC_MAX_CHARS)
        timeout = number(call, "timeoutSeconds", timeoutSeconds, minimum=0)
        limit = integer(call, "maxMessages", maxMessages, minimum=1, maximum=MAX_MESSAGES_LIMIT)
        return inrun.recv_command(ctx, currentState, topic, timeout, limit)

    @store_guard
    def recv(self, topic: str, timeoutSeconds: float = 0.0) -> Any:
        """One message of ``topic`` (its payload), or None after ``timeoutSeconds`` (a finite number
        >= 0). InvalidArgument for a bad topic or timeout, before anything is received."""
        ctx = self._ctx("recv")
        checked_text("recv", "topic", topic, max_chars=TOPIC_MAX_CHARS)
        timeout = number("recv", "timeoutSeconds", timeoutSeconds, minimum=0)
        return inrun.recv(ctx, topic, timeout)

    def checkTimeout(self) -> float | None:
        """The seconds this run has left before its ``timeoutSeconds`` (None: no timeout); raises
        Cancelled("timeout") when they are up, as ``checkCancelled`` would."""
        return inrun.time_left(self._ctx("checkTimeout"))

    @store_guard
    def writeStream(self, key: str, value: Any) -> None:
        """Append ``value`` (JSON, at most ``engine.message_max_bytes``) to this run's stream ``key``:
        durable, ordered, exactly once (a recorded step). Others read it with ``readStream``."""
        ctx = self._ctx("writeStream")
        checked_text("writeStream", "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        text = checked_json(f"writeStream({key!r})", "value", value, encode=codec.dumps,
                            max_bytes=ctx.settings.message_max_bytes, setting="message_max_bytes")
        streams.write(ctx, key, text)

    @store_guard
    def startChild(self, name: str, params: dict[str, Any] | None = None,
                   **options: Unpack[StartKeywords]) -> str:
        """Start a child run of workflow ``name`` (options as for ``start``); returns its id. A
        recorded step: a replay returns the same child and never starts a second one. Cancelling
        this run cancels the child. UnknownWorkflow, InvalidParams as for ``start``."""
        ctx = self._ctx("startChild")
        return children.start_child(ctx, self.runtime, name, params, options)

    @store_guard
    def now(self) -> datetime:
        """The current time (UTC, timezone-aware), recorded: a replay answers the same time, so
        decisions on it survive a crash. Outside a run: the current time, not recorded."""
        if current_run() is None:
            return datetime.now(UTC)
        return versioning.now(self._ctx("now"))

    @store_guard
    def patched(self, patch_id: str) -> bool:
        """True when the run takes the new code path of ``patch_id`` (it reached this call on the
        new code), False when it replays a history the old code recorded: upgrade workflows with
        runs in flight (see :mod:`exchange._engine.inrun.versioning`). ``patch_id`` a non-empty
        string of at most 100 characters (InvalidArgument)."""
        ctx = self._ctx("patched")
        checked_text("patched", "patch_id", patch_id, max_chars=PATCH_ID_MAX_CHARS)
        return versioning.patched(ctx, patch_id)

    @store_guard
    def setEvent(self, key: str, value: Any) -> None:
        """Publish ``value`` (JSON, at most ``engine.message_max_bytes``) under ``key`` (a non-empty
        string) for readers of this run (``getEvent``). InvalidArgument otherwise, nothing written."""
        ctx = self._ctx("setEvent")
        checked_text("setEvent", "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        text = checked_json(f"setEvent({key!r})", "value", value, encode=codec.dumps,
                            max_bytes=ctx.settings.message_max_bytes, setting="message_max_bytes")
        run_events.set_event(ctx, key, text)


def _workflow_body() -> RunContext | None:
    """The run whose workflow body calls now (not inside one of its steps, whose output is recorded
    whole), or None."""
    ctx = current_run()
    return ctx if ctx is not None and ctx.step is None else None


_FACADE = Workflows()


def getWorkflows() -> Workflows:
    """The runtime facade; bound to the current run when called inside one."""
    return _FACADE
