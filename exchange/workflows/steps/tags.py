"""Tag steps: ``tags.read``, ``tags.write``, ``tags.write_confirm``, ``tags.call`` (recorded, replayed,
audited).

Each call is a durable step: its outcome is recorded and a replay returns it without touching the
device, so a recorded write is never sent again. Every argument is checked before anything is sent:
a refused write (unknown path, read-only tag, wrong type, out of range, a bad timeout) raises a
FatalError (TagError, InvalidArgument) and is not retried.

A device that cannot be reached is waited for, with backoff, up to its ``comm_timeout_s`` (default
60 s): the run's progress says which device it waits for, a cancel or a STOP command ends the wait,
and the write goes out when the link returns; past the timeout the step fails with
CommunicationError. A write whose answer was lost is *in doubt*: it is resolved by the tag's
``on_doubt`` (``"readback"``: sent again only if the device does not hold the value; ``"fail"``:
never sent again, WriteInDoubt) and never resent blindly, so the write steps have no step-level
retries (``TAG_WRITE_OPTIONS``). The same holds across a crash: right before a write is sent the
step's attempt is marked STARTED in the store, and an execution that resumes the run after a crash
in between treats the write as in doubt (resolved by ``on_doubt``) instead of sending it again.

The run's audit trail gets a ``tag_write`` event for every write the device applied (tag, device,
address, value, old value where read, quality, time, ``confirmed_by``: ``acknowledged`` or
``readback``), a ``tag_write_in_doubt`` event for every write whose answer was lost (with its
``resolution``), and a ``tag_write_failed`` event for a write not made; the run, step and actor are
stamped by the engine. A method call (``tags.call``) gets ``method_call`` (its arguments and outputs),
``method_call_in_doubt`` or ``method_call_failed``; a call in doubt is never made again.

Arrays: a tag with ``type = "Float32[]"`` (or an OPC UA tag without a type whose node holds an array)
is read as a list and written with a list; ``write_confirm`` compares whole arrays, element by
element (floats with the tolerance).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from exchange import _arguments as arguments
from exchange._engine import (
    ON_ERROR,
    RunContext,
    StepOptions,
    commands_waiting,
    current_run,
    library_step,
    stop_or_abort_among,
)
from exchange._tags.delivery import WaitHooks
from exchange._tags.results import TagCallResult, TagWriteResult, WriteConfirmResult
from exchange._tags.service import TagService
from exchange._tags.table import TagDef, TagWrite
from exchange._timefmt import iso_utc
from exchange._values import QualifiedValue
from exchange._values.model import TagReading
from exchange.errors import InvalidArgument, TagError
from exchange.workflows import _services as services

__all__ = ["TAG_WRITE_OPTIONS", "call", "read", "tag_service", "write", "write_confirm"]

# No step-level retries: the tag layer rides out a lost link itself and never resends a write whose
# answer was lost (a step retry could not tell an in-doubt write from one never sent).
TAG_WRITE_OPTIONS: StepOptions = {"retries_allowed": False}


def tag_service() -> TagService:
    """The runtime's shared TagService (built from the config on first use)."""
    return services.tags()


class _Audit:
    """The run's audit trail as a delivery listener (outside a run there is no trail)."""

    def __init__(self, ctx: RunContext | None, old: dict[str, QualifiedValue]) -> None:
        self._ctx = ctx
        self._old = old

    def _record(self, kind: str, items: Sequence[TagWrite], extra: dict[str, Any]) -> None:
        ctx = self._ctx
        if ctx is None:
            return
        now = iso_utc(time.time())
        for item in items:
            payload: dict[str, Any] = {
                "tag": item.tag.path,
                "device": item.tag.device,
                "address": item.tag.address,
                "value": item.value,
                "time": now,
                **extra,
            }
            if ctx.step is not None:
                payload["step"] = ctx.step.name
                payload["attempt"] = ctx.step.attempt
            previous = self._old.get(item.tag.path)
            if previous is not None:
                payload["old_value"] = previous.value
                payload["old_quality"] = previous.quality.value
            ctx.record_event(kind, payload)

    def written(self, items: Sequence[TagWrite], confirmed_by: str) -> None:
        self._record("tag_write", items, {"quality": "Good", "confirmed_by": confirmed_by})

    def in_doubt(self, items: Sequence[TagWrite], error: str, resolution: str) -> None:
        self._record("tag_write_in_doubt", items, {"error": error, "resolution": resolution})

    def failed(self, items: Sequence[TagWrite], quality: str, error: str) -> None:
        self._record("tag_write_failed", items, {"quality": quality, "error": error})

    # a method call (tags.call): one event per call
    def _record_call(self, kind: str, tag: TagDef, method: str, args: Sequence[Any], extra: dict[str, Any]) -> None:
        ctx = self._ctx
        if ctx is None:
            return
        payload: dict[str, Any] = {"tag": tag.path, "device": tag.device, "address": tag.address, "method": method,
                                   "arguments": [_plain(a) for a in args], "time": iso_utc(time.time()), **extra}
        if ctx.step is not None:
            payload["step"] = ctx.step.name
            payload["attempt"] = ctx.step.attempt
        ctx.record_event(kind, payload)

    def called(self, tag: TagDef, method: str, args: Sequence[Any], outputs: list[Any]) -> None:
        self._record_call("method_call", tag, method, args, {"outputs": outputs, "status": "Good"})

    def call_in_doubt(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None:
        self._record_call("method_call_in_doubt", tag, method, args, {"error": error, "resolution": "not called again"})

    def call_failed(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None:
        self._record_call("method_call_failed", tag, method, args, {"error": error})


def _plain(value: Any) -> Any:
    """A call argument as the audit trail can hold it (JSON); anything else as its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


def audit_listener(ctx: RunContext | None) -> _Audit:
    """The run's audit trail as a delivery listener (a step of the library that writes tags)."""
    return _Audit(ctx, {})


def wait_hooks(ctx: RunContext | None) -> WaitHooks:
    """How a step of the library waits for a device inside a run: cancellable, shown in the run's
    progress, ended by a STOP or an ABORT command."""
    if ctx is None:
        return WaitHooks()
    before: list[tuple[str, Any] | None] = []

    def waiting(device: str, reason: str, waited_s: float, timeout_s: float) -> None:
        if not before:
            before.append(ctx.progress_shown)
        ctx.set_progress(
            f"waiting for device {device!r} ({waited_s:.0f} of {timeout_s:g} s): {reason}",
            {"waiting_for_device": device},
        )
        ctx.flush_progress()

    def resumed(device: str, waited_s: float) -> None:
        if before and before[0] is not None:
            ctx.set_progress(*before[0])
            ctx.flush_progress()

    return WaitHooks(check=ctx.check_cancelled, stop_requested=lambda: _stop_waiting(ctx), sleep=ctx.sleep,
                     waiting=waiting, resumed=resumed, sending=ctx.begin_side_effect)


def _resumed_in_doubt(ctx: RunContext | None) -> str | None:
    """Why the write is in doubt before it is sent: an earlier execution of this step was
    interrupted after it began sending (its STARTED mark is recorded, its outcome is not), or
    failed after it began sending and the run was retried."""
    if ctx is None or ctx.step is None or not ctx.step.resumed_in_doubt:
        return None
    return (f"an earlier execution of step {ctx.step.name!r} (run {ctx.run_id}, sequence {ctx.step.seq}) "
            f"stopped while sending this write, before its outcome was recorded, or failed after sending it "
            f"(the run was retried)")


def _stop_waiting(ctx: RunContext) -> str | None:
    """A reason to give up a wait for a device: a STOP or an ABORT waiting in the run's mailbox."""
    ending = stop_or_abort_among(commands_waiting(ctx))
    return None if ending is None else f"{'an' if ending == 'ABORT' else 'a'} {ending} command is waiting for the run"


def _paths(call: str, path: Any) -> list[str]:
    if isinstance(path, str):
        return [path]
    if isinstance(path, (list, tuple)) and path:
        return list(path)
    raise InvalidArgument(
        f"{call}: path must be a tag path like '[plant]Line1/Tank/Level' or a non-empty list of them, "
        f"got {arguments.shown(path)}"
    )


def _written_dict(item: TagWrite) -> TagWriteResult:
    return {"path": item.tag.path, "value": item.value, "quality": "Good", "timestamp": iso_utc(time.time())}


@library_step("tags.read", per_call=(ON_ERROR,))
def read(path: str | Sequence[str], *, on_error: str | None = None) -> TagReading | list[TagReading]:
    """``{value, quality, timestamp}`` of one tag, or a list of them for a list of paths.

    Many paths are read with one batched request per device. An unknown or malformed path raises
    (UnknownTag, TagPathError); a device that is down gives quality ``Bad_NotConnected``. A device
    inside its reconnect backoff is tried at once (a step RESUMEd after the device came back reads
    it), not left to the backoff as background polls are.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first."""
    paths = _paths("tags.read", path)
    values = tag_service().read(paths, explicit=True)  # a device that just came back is tried at once
    if isinstance(path, str):
        return values[0].to_dict()
    return [value.to_dict() for value in values]


@library_step("tags.write", TAG_WRITE_OPTIONS, per_call=(ON_ERROR,))
def write(
    path: str | Sequence[str], value: Any, *, on_error: str | None = None
) -> TagWriteResult | list[TagWriteResult]:
    """Write one tag, or a list of tags with a list of values (one request per device).

    Everything is validated before anything is sent: a refused write raises a TagError subclass
    (UnknownTag, ReadOnlyTag, TagTypeError, TagRangeError) or InvalidArgument and writes nothing. A
    lost link is waited for (CommunicationError past the device's ``comm_timeout_s``); a lost answer
    is resolved by the tag's ``on_doubt`` (WriteInDoubt when it cannot be). Returns
    ``{path, value, quality, timestamp}`` (the value as written, converted to the tag's type), or a
    list of them.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first."""
    paths = _paths("tags.write", path)
    single = isinstance(path, str)
    if single:
        values = [value]
    elif isinstance(value, (list, tuple)):
        values = list(value)
    else:
        raise TagError(f"tags.write with a list of {len(paths)} paths needs a list of values, got "
                       f"{arguments.shown(value)}")
    svc = tag_service()
    planned = svc.prepare_write(paths, values)
    ctx = current_run()
    svc.deliver(planned, listener=_Audit(ctx, {}), hooks=wait_hooks(ctx), resumed_in_doubt=_resumed_in_doubt(ctx))
    results = [_written_dict(item) for item in planned]
    return results[0] if single else results


@library_step("tags.call", TAG_WRITE_OPTIONS, per_call=(ON_ERROR,))
def call(path: str, method: str, *args: Any, on_error: str | None = None) -> TagCallResult:
    """Call ``method`` of the OPC UA object that the tag at ``path`` addresses, with ``args``.

    ``path`` is a configured tag whose address is the object's NodeId (``access = "rw"``: calls are
    side effects); ``method`` is the method's browse name (``"LoadRecipe"``) or NodeId. The
    arguments are converted to the types the method declares (its InputArguments: a float to a
    Float argument, a list to an array argument) and checked before anything is sent:
    InvalidArgument for a wrong count or an unknown method, TagTypeError/TagRangeError naming the
    argument. A lost link is waited for (CommunicationError past ``comm_timeout_s``); a call whose
    answer was lost is never made again (WriteInDoubt); a refused call raises DeviceError with the
    server's status code (``status_code``, and its name in the message). Returns ``{path, method,
    outputs}``, ``outputs`` the method's output arguments in order. Recorded like a write: a replay
    returns the recorded result and never calls again.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first."""
    name = "tags.call"
    if not isinstance(path, str):
        raise InvalidArgument(f"{name}: path must be the tag path of an object, got {arguments.shown(path)}")
    if not isinstance(method, str) or not method.strip():
        raise InvalidArgument(f"{name}: method must be a method's browse name or NodeId, got "
                              f"{arguments.shown(method)}")
    svc = tag_service()
    ctx = current_run()
    outputs = svc.call(path, method, args, listener=_Audit(ctx, {}), hooks=wait_hooks(ctx),
                       resumed_in_doubt=_resumed_in_doubt(ctx))
    return {"path": svc.tag(path).path, "method": method, "outputs": outputs}


@library_step("tags.write_confirm", TAG_WRITE_OPTIONS, per_call=(ON_ERROR,))
def write_confirm(
    path: str,
    value: Any,
    confirm_path: str | None = None,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
    *,
    on_error: str | None = None,
) -> WriteConfirmResult:
    """Write ``value`` to ``path``, then wait until ``confirm_path`` (default ``path``) reads it.

    Returns ``{confirmed: True, path, value, confirm_path, elapsed_ms}`` (elapsed from the write to
    the confirmation). Raises ConfirmTimeout naming the path, the expected and the last seen value
    when the value does not arrive within ``timeout_ms``. Confirmation is event-driven where the
    driver subscribes (OPC UA) and polled every ``poll_ms`` elsewhere; floats compare with a
    tolerance (``tolerance``, else by type). The old value is read first for the audit trail.
    Cancellation is noticed within one poll. Every argument is checked before the write
    (InvalidArgument: ``timeout_ms`` >= 0, ``poll_ms`` >= 1, ``tolerance`` >= 0, all finite numbers);
    the write is delivered as :func:`write` delivers it.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first."""
    call = "tags.write_confirm"
    if not isinstance(path, str):
        raise InvalidArgument(f"{call}: path must be a tag path, got {arguments.shown(path)}")
    timeout_s = arguments.number(call, "timeout_ms", timeout_ms, minimum=0) / 1000
    poll_s = arguments.number(call, "poll_ms", poll_ms, minimum=1) / 1000
    tolerance = arguments.optional_number(call, "tolerance", tolerance, minimum=0)
    svc = tag_service()
    planned = svc.prepare_write([path], [value])
    target = planned[0]
    confirm = svc.tag(confirm_path) if confirm_path is not None else target.tag
    ctx = current_run()
    old = svc.read_tags([target.tag], explicit=True)[0]
    started = time.monotonic()
    svc.deliver(planned, listener=_Audit(ctx, {target.tag.path: old}), hooks=wait_hooks(ctx),
                resumed_in_doubt=_resumed_in_doubt(ctx))
    svc.wait_for_value(
        confirm.path,
        target.value,
        timeout_s=timeout_s,
        poll_s=poll_s,
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
