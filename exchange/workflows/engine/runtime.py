"""The process's runtime: config, store, registry, shared services and the runs executing here.

It is the one public way in for the CLI, the Python API and (later) the HTTP API: start runs, wait
for them, read them, send commands, cancel. Execution itself lives in
:mod:`exchange.workflows.engine.executor` and :mod:`exchange.workflows.engine.dispatcher`.

This module also owns the lookup of "the runtime" (:func:`current_runtime`): the one executing the
run on the calling thread, else the process's (installed with :func:`set_runtime`, or built from the
config on first use). The facade ``exchange.workflows.engine.instance`` re-exports it.
"""

from __future__ import annotations

import contextvars
import getpass
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from exchange.config import Config, load_config
from exchange.errors import InvalidParams, UnknownRun, WorkflowError
from exchange.workflows.engine import commands
from exchange.workflows.engine.context import RunContext
from exchange.workflows.engine.registry import REGISTRY, Registry
from exchange.workflows.engine.resources import Services
from exchange.workflows.engine.views import run_view
from exchange.workflows.store import codec
from exchange.workflows.store import records as r
from exchange.workflows.store.runs import Holder, NewRun
from exchange.workflows.store.store import Store

log = logging.getLogger(__name__)

START_OPTIONS = ("queue", "partitionKey", "priority", "deduplicationId", "timeoutSeconds", "actor")
# Text options and the size of the store column each one goes to.
_TEXT_OPTIONS = {"queue": 100, "partitionKey": 200, "deduplicationId": 200, "actor": 200}


def default_actor() -> str:
    """Who is acting when the caller does not say: ``user@host`` of this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER", "unknown")
    return f"{user}@{os.uname().nodename}"


class Runtime:
    def __init__(self, config: Config, *, store: Store | None = None, registry: Registry | None = None) -> None:
        self.config = config
        self.store = store or Store(config.store_url, shared=config.store_shared)
        self.registry = registry or REGISTRY
        self.services = Services(config)
        self.node_id = config.node_id()
        self._local: dict[str, RunContext] = {}
        self._local_lock = threading.Lock()
        self._finished = threading.Condition()
        self._enqueue_listeners: list[Callable[[], None]] = []
        self.mail_watched = False  # a dispatcher's mail watcher wakes the runs executing here

    # ----- runs executing in this process -------------------------------------------------------
    def attach(self, ctx: RunContext) -> None:
        with self._local_lock:
            self._local[ctx.run_id] = ctx

    def detach(self, run_id: str) -> None:
        with self._local_lock:
            self._local.pop(run_id, None)
        with self._finished:
            self._finished.notify_all()

    def local_run(self, run_id: str) -> RunContext | None:
        with self._local_lock:
            return self._local.get(run_id)

    def notify_mail(self, run_id: str) -> None:
        """Messages arrived for ``run_id``: wake it if it executes here (a watcher or a local send)."""
        ctx = self.local_run(run_id)
        if ctx is not None:
            ctx.mail_arrived()

    def on_enqueue(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each start in this process (a dispatcher wakes up at once)."""
        self._enqueue_listeners.append(listener)

    # ----- the public API ------------------------------------------------------------------------
    def start(self, name: str, params: dict[str, Any] | None = None, **options: Any) -> str:
        """Enqueue a run of workflow ``name``; returns its id (the existing one for a repeated
        ``deduplicationId``). Options: queue, partitionKey, priority, deduplicationId, timeoutSeconds,
        actor."""
        run_id, _ = self.create_run(name, params, **options)
        for listener in self._enqueue_listeners:
            listener()
        return run_id

    def create_run(
        self, name: str, params: dict[str, Any] | None = None, *, holder: Holder | None = None, **options: Any
    ) -> tuple[str, bool]:
        """Validate and insert a run; ``holder`` creates it PENDING and held, with a lease, for an
        execution in this process (``exchange run``). Returns ``(run_id, created)``."""
        unknown = set(options) - set(START_OPTIONS)
        if unknown:
            raise InvalidParams(
                f"unknown start option(s) {', '.join(sorted(unknown))} (known: {', '.join(START_OPTIONS)})"
            )
        for key, max_chars in _TEXT_OPTIONS.items():
            value = options.get(key)
            if value is not None and (len(str(value)) > max_chars or "\x00" in str(value)):
                raise InvalidParams(f"{key} must be at most {max_chars} characters without NUL bytes")
        definition = self.registry.get(name)
        params = dict(params or {})
        definition.bind_params(params)
        timeout = options.get("timeoutSeconds")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise InvalidParams(f"timeoutSeconds must be a positive number, got {timeout!r}")
        priority = options.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidParams(f"priority must be an integer, got {priority!r}")
        new = NewRun(
            workflow=name,
            params_json=codec.dumps(params),
            code_version=definition.code_version,
            created_by=str(options.get("actor") or default_actor()),
            queue=str(options.get("queue") or "default"),
            partition_key=None if options.get("partitionKey") is None else str(options["partitionKey"]),
            priority=priority,
            dedup_id=None if options.get("deduplicationId") is None else str(options["deduplicationId"]),
            timeout_seconds=None if timeout is None else float(timeout),
        )
        return self.store.create_run(new, holder=holder)

    def getRun(self, run_id: str, *, steps: bool = True, events: bool = True) -> dict[str, Any]:
        rec = self.store.runs.get(run_id)
        if rec is None:
            raise UnknownRun(run_id)
        return run_view(self.store, rec, steps=steps, events=events)

    def listRuns(
        self, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        if status is not None and status.upper() not in r.ALL_STATUSES:
            raise WorkflowError(f"unknown status {status!r} (known: {', '.join(r.ALL_STATUSES)})")
        return [
            run_view(self.store, rec, steps=False, events=False)
            for rec in self.store.runs.list(status.upper() if status else None, workflow, limit)
        ]

    def waitFor(self, run_id: str, timeoutSeconds: float | None = None) -> dict[str, Any]:
        """Block until the run is finished (or the timeout passes); returns the run dict either way."""
        deadline = None if timeoutSeconds is None else time.monotonic() + timeoutSeconds
        poll_seconds = self.config.engine.mailbox_poll_ms / 1000
        while True:
            rec = self.store.runs.get(run_id)
            if rec is None:
                raise UnknownRun(run_id)
            if rec.finished:
                return run_view(self.store, rec)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return run_view(self.store, rec)
            with self._finished:
                self._finished.wait(poll_seconds if remaining is None else min(poll_seconds, remaining))

    def sendCommand(
        self, run_id: str, cmd: str, reason: str | None = None, *, actor: str | None = None,
        topic: str = commands.COMMAND_TOPIC, args: Any = None,
    ) -> int:
        """Post an operator command to the run's mailbox; returns the message id."""
        name = commands.normalise_command(cmd)
        actor = actor or default_actor()
        payload = {"cmd": name, "reason": reason, "actor": actor, "args": args}
        return self._post(run_id, topic, payload, actor, reason, ("command_sent", {"cmd": name, "topic": topic}))

    def send(self, run_id: str, topic: str, message: Any, *, actor: str | None = None) -> int:
        """Post any JSON message to the run's ``topic``."""
        try:
            codec.dumps(message)
        except codec.NotJSON as exc:
            raise InvalidParams(f"message to run {run_id} is not JSON: {exc}") from None
        return self._post(run_id, topic, message, actor or default_actor(), None, None)

    def _post(
        self, run_id: str, topic: str, payload: Any, actor: str, reason: str | None,
        event: tuple[str, Any] | None,
    ) -> int:
        status, message_id = self.store.send_message(
            run_id, topic, payload, actor=actor, reason=reason, event=event
        )
        if status is None:
            raise UnknownRun(run_id)
        if message_id is None:
            raise WorkflowError(f"run {run_id} is {status}; messages only reach unfinished runs")
        self.notify_mail(run_id)
        return message_id

    def cancel(self, run_id: str, reason: str | None = None, *, actor: str | None = None) -> str:
        """Ask the run to stop; returns its status at the time (CANCELLED at once if still ENQUEUED)."""
        status = self.store.request_cancel(run_id, actor=actor or default_actor(), reason=reason)
        if status is None:
            raise UnknownRun(run_id)
        ctx = self.local_run(run_id)
        if ctx is not None:
            ctx.cancel(reason)
        with self._finished:
            self._finished.notify_all()
        return status

    def getEvent(self, run_id: str, key: str, timeoutSeconds: float = 0.0) -> Any:
        """The run's value for ``key`` (set with setEvent), waiting up to ``timeoutSeconds`` for it."""
        deadline = time.monotonic() + timeoutSeconds
        while True:
            text = self.store.values.get(run_id, key)
            if text is not None:
                return codec.loads(text)
            if time.monotonic() >= deadline:
                if self.store.runs.get(run_id) is None:
                    raise UnknownRun(run_id)
                return None
            time.sleep(min(self.config.engine.mailbox_poll_ms / 1000, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        self.services.close()
        self.store.close()


# ----- which runtime ------------------------------------------------------------------------------
_process_runtime: Runtime | None = None
_process_lock = threading.Lock()
_executing: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar("exchange_runtime", default=None)


def set_runtime(runtime: Runtime | None) -> Runtime | None:
    """Install ``runtime`` as the process's runtime (None: forget it); returns the previous one."""
    global _process_runtime
    with _process_lock:
        previous, _process_runtime = _process_runtime, runtime
    return previous


def configure(config: Config) -> Runtime:
    """Build the process runtime from ``config`` and install it."""
    runtime = Runtime(config)
    set_runtime(runtime)
    return runtime


def current_runtime() -> Runtime:
    """The runtime of the run on this thread, else the process runtime (built from the config)."""
    executing = _executing.get()
    if executing is not None:
        return executing
    global _process_runtime
    if _process_runtime is None:
        with _process_lock:
            if _process_runtime is None:
                _process_runtime = Runtime(load_config())
    return _process_runtime


def bind_executing(runtime: Runtime) -> contextvars.Token[Runtime | None]:
    """Make ``runtime`` the current one on this thread while it executes a run."""
    return _executing.set(runtime)


def unbind_executing(token: contextvars.Token[Runtime | None]) -> None:
    _executing.reset(token)
