"""Maintenance mode: before a gateway update, an admin drains every gateway on the store.

- ``drain``: no gateway starts a new run (claims stop; schedules and triggers start nothing; a
  ``start`` still enqueues, the run waits ENQUEUED); runs already executing go on and finish, and a
  run whose gateway died is still taken over (it was running).
- ``cancel``: drain, and cancel the queued runs now (of one queue, or all).
- ``exit``: back to normal; queued runs start.

The mode lives in the store (``exchange_control``), so every gateway obeys it; a claim reads it in
its own transaction, so no run starts after ``drain`` returned. Each change is in the audit log
with its actor and reason. :func:`may_start_new` is the one check the gateway's own starters
(schedules, triggers) make before starting anything.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any

from exchange._engine.operator import Runtime
from exchange._store import MAINTENANCE, is_draining
from exchange._store import records as r
from exchange._timefmt import iso_utc
from exchange.errors import InvalidArgument, WorkflowError

log = logging.getLogger(__name__)

MODES = ("drain", "cancel", "normal")
RUNNING_SHOWN = 200  # runs listed by status()


def _mode_of(value: Any) -> str:
    return value.get("mode", "normal") if isinstance(value, dict) else "normal"


def may_start_new(runtime: Runtime) -> bool:
    """False while maintenance drains the gateways: start nothing new."""
    return not is_draining(runtime.store.control.get(MAINTENANCE))


class Maintenance:
    """The maintenance mode of the store ``runtime`` uses."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _set(self, mode: str, *, actor: str, reason: str | None, queue: str | None = None) -> None:
        store = self.runtime.store
        value = {"mode": mode, "reason": reason, "queue": queue}
        store.control.put(MAINTENANCE, value, actor=actor)
        store.audit.record_done(f"maintenance_{mode}", MAINTENANCE, actor=actor, reason=reason, details=value,
                                label=f"maintenance {mode}")
        log.warning("maintenance: %s by %s%s", mode, actor, f" ({reason})" if reason else "")

    def drain(self, *, actor: str, reason: str | None = None) -> dict[str, Any]:
        """Start nothing new on any gateway; running runs finish. Returns :meth:`status`."""
        self._set("drain", actor=actor, reason=reason)
        return self.status()

    def cancel(self, *, actor: str, reason: str | None = None, queue: str | None = None) -> dict[str, Any]:
        """Drain, and cancel the runs waiting ENQUEUED (of ``queue``, or all); returns :meth:`status`
        with ``cancelled``: the ids cancelled."""
        if queue is not None and (not isinstance(queue, str) or not queue.strip()):
            raise InvalidArgument("maintenance cancel: queue must be a queue name")
        if queue is not None:
            self._check_queue(queue)
        self._set("cancel", actor=actor, reason=reason, queue=queue)
        cancelled: list[str] = []
        while True:  # runs enqueued meanwhile are cancelled too; each batch is one listing
            waiting = [rec for rec in self.runtime.store.runs.list(r.ENQUEUED, limit=500)
                       if queue is None or rec.queue == queue]
            waiting = [rec for rec in waiting if rec.id not in cancelled]
            if not waiting:
                break
            for rec in waiting:
                try:
                    self.runtime.cancel(rec.id, reason or "maintenance cancel", actor=actor)
                except WorkflowError:
                    pass  # it finished or went on meanwhile: not a queued run any more
                cancelled.append(rec.id)
        status = self.status()
        status["cancelled"] = cancelled
        return status

    def _check_queue(self, queue: str) -> None:
        """InvalidArgument naming ``queue`` when no run of the store was ever in it: a typo would
        otherwise drain every gateway and cancel nothing (checked before anything is changed)."""
        known = sorted(self.runtime.store.lookup.count_by_queue_and_status())
        if queue in known:
            return
        close = difflib.get_close_matches(queue, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InvalidArgument(f"maintenance cancel: no run is or was in queue {queue!r} ({hint}queues: "
                              f"{', '.join(known) or 'none'}); nothing was changed")

    def exit(self, *, actor: str, reason: str | None = None) -> dict[str, Any]:
        """Back to normal: queued runs start again. Returns :meth:`status`."""
        self._set("normal", actor=actor, reason=reason)
        return self.status()

    def status(self) -> dict[str, Any]:
        """The mode (``normal``, ``drain``, ``cancel``), who set it, when and why, and what still
        runs: counts by status and, per gateway node, the active runs."""
        store = self.runtime.store
        setting = store.control.get(MAINTENANCE)
        counts = store.lookup.count_by_status()
        active = [rec for status in r.ACTIVE_STATUSES for rec in store.runs.list(status, limit=RUNNING_SHOWN)]
        by_node: dict[str, list[dict[str, Any]]] = {}
        for rec in sorted(active, key=lambda rec: rec.created_at):
            by_node.setdefault(rec.owner_node or "(none)", []).append(
                {"id": rec.id, "workflow": rec.workflow, "status": rec.status, "state": rec.state})
        value = setting.value if setting is not None else {}
        return {
            "mode": _mode_of(value),
            "reason": value.get("reason") if isinstance(value, dict) else None,
            "queue": value.get("queue") if isinstance(value, dict) else None,
            "set_by": setting.set_by if setting is not None else None,
            "set_at": iso_utc(setting.set_at) if setting is not None else None,
            "active": sum(counts.get(status, 0) for status in r.ACTIVE_STATUSES),
            "queued": counts.get(r.ENQUEUED, 0),
            "running_by_node": by_node,
        }
