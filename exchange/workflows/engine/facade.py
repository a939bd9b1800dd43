"""The object ``getWorkflows()`` returns: the runtime facade of the authoring API (camelCase, as in
Ignition).

Outside a run it offers ``start``, ``waitFor``, ``getRun``, ``listRuns``, ``sendCommand``, ``send``,
``cancel`` and ``getEvent``. Inside a run it is bound to the run executing on the calling thread and
adds ``checkCancelled``, ``isCancelled``, ``progress``, ``setState``, ``recvCommand``, ``recv``,
``setEvent`` and ``runId``.
"""

from __future__ import annotations

from typing import Any

from exchange.errors import Cancelled, InvalidParams, OutsideRunError
from exchange.workflows.engine import inrun
from exchange.workflows.engine.commands import COMMAND_TOPIC
from exchange.workflows.engine.context import RunContext, current_run, store_guard
from exchange.workflows.engine.runtime import Runtime, current_runtime
from exchange.workflows.store import codec

__all__ = ["Workflows", "getWorkflows"]


class Workflows:
    """The object ``getWorkflows()`` returns."""

    # ----- anywhere ------------------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        return current_runtime()

    def start(self, name: str, params: dict[str, Any] | None = None, **options: Any) -> str:
        return self.runtime.start(name, params, **options)

    def waitFor(self, run_id: str, timeoutSeconds: float | None = None) -> dict[str, Any]:
        return self.runtime.waitFor(run_id, timeoutSeconds)

    def getRun(self, run_id: str) -> dict[str, Any]:
        return self.runtime.getRun(run_id)

    def listRuns(self, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self.runtime.listRuns(status=status, limit=limit)

    def sendCommand(self, run_id: str, cmd: str, reason: str | None = None, **kwargs: Any) -> int:
        return self.runtime.sendCommand(run_id, cmd, reason, **kwargs)

    def send(self, run_id: str, topic: str, message: Any) -> int:
        return self.runtime.send(run_id, topic, message)

    def cancel(self, run_id: str, reason: str | None = None) -> str:
        return self.runtime.cancel(run_id, reason)

    def getEvent(self, run_id: str, key: str, timeoutSeconds: float = 0.0) -> Any:
        return self.runtime.getEvent(run_id, key, timeoutSeconds)

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
        """Report progress: the run keeps the latest value and a history; writes are throttled."""
        ctx = self._ctx("progress")
        if extra is not None:
            try:
                codec.dumps(extra)
            except codec.NotJSON as exc:
                raise InvalidParams(f"progress extra is not JSON: {exc}") from None
        ctx.set_progress(str(message), extra)

    @store_guard
    def setState(self, state: str) -> None:
        """Report the run's ISA-88 state (STARTING, RUNNING, HELD, ...) without receiving commands:
        nothing waiting in the mailbox is consumed or dropped. ``recvCommand()`` without a
        ``currentState`` judges commands in this state."""
        inrun.set_state(self._ctx("setState"), state)

    @store_guard
    def recvCommand(
        self,
        currentState: str | None = None,
        topic: str = COMMAND_TOPIC,
        timeoutSeconds: float = 0.0,
        maxMessages: int = 8,
    ) -> dict[str, Any] | None:
        """Drain up to ``maxMessages`` commands; return the highest-priority one allowed in
        ``currentState`` (``{cmd, reason, actor, sentAt, ...}``) or None. ``currentState`` (default:
        the state last reported, else RUNNING) becomes the run's reported state; commands not allowed
        in it are dropped and recorded as events."""
        ctx = self._ctx("recvCommand")
        return inrun.recv_command(ctx, currentState, topic, float(timeoutSeconds), int(maxMessages))

    @store_guard
    def recv(self, topic: str, timeoutSeconds: float = 0.0) -> Any:
        return inrun.recv(self._ctx("recv"), topic, float(timeoutSeconds))

    @store_guard
    def setEvent(self, key: str, value: Any) -> None:
        """Publish ``value`` under ``key`` for readers of this run (``getEvent``)."""
        ctx = self._ctx("setEvent")
        try:
            text = codec.dumps(value)
        except codec.NotJSON as exc:
            raise InvalidParams(f"setEvent({key!r}) value is not JSON: {exc}") from None
        if not ctx.replaying():
            ctx.make_answers_durable()  # readers of the value may act on it: a side effect
            ctx.store.values.set(ctx.fence, key, text)


_FACADE = Workflows()


def getWorkflows() -> Workflows:
    """The runtime facade; bound to the current run when called inside one."""
    return _FACADE
