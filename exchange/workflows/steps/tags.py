"""Tag steps: ``tags.read``, ``tags.write``, ``tags.write_confirm`` (recorded, replayed, audited).

Each call is a durable step: its outcome is recorded and a replay returns it without touching the
device, so a recorded write is never sent again. A refused write (unknown path, read-only tag,
wrong type, out of range) raises a FatalError (a TagError) before anything is sent and is not
retried; a device that cannot be reached raises CommunicationError, which the write steps retry
(``TAG_WRITE_OPTIONS``). Every write a device acknowledged is recorded in the run's audit trail
as a ``tag_write`` event (tag, device, address, value, old value where read, quality, time; the
run, step and actor are stamped by the engine); a write whose outcome is unknown because the
connection failed is recorded as ``tag_write_failed``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from exchange.errors import CommunicationError, DeviceError, TagError
from exchange.tags.model import QualifiedValue
from exchange.tags.service import TagService, TagWrite
from exchange.timefmt import iso_utc
from exchange.workflows.engine.context import current_run
from exchange.workflows.engine.decorators import step
from exchange.workflows.engine.services import service

__all__ = ["TAG_WRITE_OPTIONS", "read", "tag_service", "write", "write_confirm"]

# a device that did not answer is worth two more tries; a refused write (FatalError) never retries
TAG_WRITE_OPTIONS: dict[str, Any] = {
    "retries_allowed": True,
    "max_attempts": 3,
    "interval_seconds": 1.0,
    "backoff_rate": 2.0,
}


def tag_service() -> TagService:
    """The runtime's shared TagService (built from the config on first use)."""
    return service("tags", TagService.from_config)


def _audit(items: Sequence[TagWrite], old: dict[str, QualifiedValue], quality: str, error: str | None) -> None:
    """Record one event per write in the current run (outside a run there is no trail)."""
    ctx = current_run()
    if ctx is None:
        return
    now = iso_utc(time.time())
    for item in items:
        payload: dict[str, Any] = {
            "tag": item.tag.path,
            "device": item.tag.device,
            "address": item.tag.address,
            "value": item.value,
            "quality": quality,
            "time": now,
        }
        if ctx.step is not None:
            payload["step"] = ctx.step.name
            payload["attempt"] = ctx.step.attempt
        previous = old.get(item.tag.path)
        if previous is not None:
            payload["old_value"] = previous.value
            payload["old_quality"] = previous.quality.value
        if error is not None:
            payload["error"] = error
        ctx.record_event("tag_write" if error is None else "tag_write_failed", payload)


def _write_audited(
    svc: TagService, planned: list[TagWrite], old: dict[str, QualifiedValue]
) -> None:
    """Write ``planned`` (already validated), auditing each device's acknowledged writes."""
    done: set[str] = set()

    def written(items: list[TagWrite]) -> None:
        done.update(i.tag.path for i in items)
        _audit(items, old, "Good", None)

    try:
        svc.write([p.tag.path for p in planned], [p.requested for p in planned], on_written=written)
    except (CommunicationError, DeviceError) as exc:
        unknown = [p for p in planned if p.tag.path not in done]
        quality = "Bad_NotConnected" if isinstance(exc, CommunicationError) else "Bad_DeviceError"
        _audit(unknown, old, quality, str(exc))
        raise


def _written_dict(item: TagWrite) -> dict[str, Any]:
    return {"path": item.tag.path, "value": item.value, "quality": "Good", "timestamp": iso_utc(time.time())}


@step(name="tags.read")
def read(path: str | Sequence[str]) -> dict[str, Any] | list[dict[str, Any]]:
    """``{value, quality, timestamp}`` of one tag, or a list of them for a list of paths.

    Many paths are read with one batched request per device. An unknown or malformed path raises
    (UnknownTag, TagPathError); a device that is down gives quality ``Bad_NotConnected``.
    """
    svc = tag_service()
    if isinstance(path, str):
        return svc.read([path])[0].to_dict()
    return [value.to_dict() for value in svc.read(list(path))]


@step(name="tags.write", options=TAG_WRITE_OPTIONS)
def write(path: str | Sequence[str], value: Any) -> dict[str, Any] | list[dict[str, Any]]:
    """Write one tag, or a list of tags with a list of values (one request per device).

    Everything is validated before anything is sent: a refused write raises a TagError subclass
    (UnknownTag, ReadOnlyTag, TagTypeError, TagRangeError) and writes nothing. Returns
    ``{path, value, quality, timestamp}`` (the value as written, converted to the tag's type), or a
    list of them.
    """
    svc = tag_service()
    single = isinstance(path, str)
    paths: list[str] = [path] if isinstance(path, str) else list(path)
    if single:
        values = [value]
    elif isinstance(value, (list, tuple)):
        values = list(value)
    else:
        raise TagError(f"tags.write with a list of {len(paths)} paths needs a list of values, got {value!r}")
    planned = svc.prepare_write(paths, values)
    _write_audited(svc, planned, {})
    results = [_written_dict(item) for item in planned]
    return results[0] if single else results


@step(name="tags.write_confirm", options=TAG_WRITE_OPTIONS)
def write_confirm(
    path: str,
    value: Any,
    confirm_path: str | None = None,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Write ``value`` to ``path``, then wait until ``confirm_path`` (default ``path``) reads it.

    Returns ``{confirmed: True, path, value, confirm_path, elapsed_ms}`` (elapsed from the write to
    the confirmation). Raises ConfirmTimeout naming the path, the expected and the last seen value
    when the value does not arrive within ``timeout_ms``. Confirmation is event-driven where the
    driver subscribes (OPC UA) and polled every ``poll_ms`` elsewhere; floats compare with a
    tolerance (``tolerance``, else by type). The old value is read first for the audit trail.
    Cancellation is noticed within one poll.
    """
    svc = tag_service()
    ctx = current_run()
    planned = svc.prepare_write([path], [value])
    target = planned[0]
    confirm = svc.tag(confirm_path) if confirm_path is not None else target.tag
    old = svc.read_tags([target.tag])[0]
    started = time.monotonic()
    _write_audited(svc, planned, {target.tag.path: old})
    svc.wait_for_value(
        confirm.path,
        target.value,
        timeout_s=timeout_ms / 1000,
        poll_s=poll_ms / 1000,
        check_cancelled=ctx.check_cancelled if ctx is not None else None,
        sleep=ctx.sleep if ctx is not None else None,
        tolerance=tolerance,
    )
    return {
        "confirmed": True,
        "path": target.tag.path,
        "value": target.value,
        "confirm_path": confirm.path,
        "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
    }
