"""A tag written by a person (``exchange tags write``): a workflow's checks, sent at most once, audited.

- The text typed is read for the tag's type (:func:`value_from_text`; an array tag's as a JSON list,
  ``[1, 2, 3]``) and goes through
  :meth:`~exchange._tags.service.TagService.prepare_write`, the very checks a workflow's
  ``tags.write`` makes (``access``, what the protocol can write, the type, ``min``/``max``): a refused
  value sends nothing. A tag whose type only the device knows (OPC UA without ``type``) gets the text
  as typed, and its driver converts it by the same rules for the node's type right before the
  request: a value that does not fit is refused then, still before anything is sent.
- Sent at most once (:func:`write_once`): a device that cannot be reached is not waited for (nothing
  was sent, it fails at once); a write whose answer was lost is read back where the tag's ``on_doubt``
  allows, and counts as written only when the device holds the value, but it is never sent again
  (WriteInDoubt).
- Audited: :class:`WriteAudit` records who, why, the tag, its old and its new value durably before
  the request goes out (a failing audit stops the write), and the outcome after it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange._arguments import shown
from exchange._tags.delivery import WaitHooks
from exchange._tags.service import TagService
from exchange._tags.table import TagDef, TagWrite
from exchange._values import QualifiedValue
from exchange._values.convert import to_number
from exchange.errors import CommunicationError, DeviceError, TagError, TagTypeError, WriteInDoubt

__all__ = ["IN_DOUBT", "NOT_WRITTEN", "WRITTEN", "HandWrite", "WriteAudit", "confirm", "plan_write",
           "value_from_text", "write_once"]

log = logging.getLogger(__name__)

WRITTEN = "WRITTEN"  # the device acknowledged it, or holds the value after a lost answer
IN_DOUBT = "IN_DOUBT"  # it may have been applied; it was not sent again
NOT_WRITTEN = "NOT_WRITTEN"  # refused by the device or its driver, or the device could not be reached

# Why a write by hand does not wait for a lost link: the person sees the failure at once and decides.
NO_WAIT = "a write by hand does not wait for the device"


class WriteAudit(Protocol):
    """Where a write by hand is recorded (the store's audit log, for the command line)."""

    def begin(self, item: TagWrite, old: QualifiedValue) -> None:
        """Record the write before it is sent; raising stops it (nothing is sent)."""

    def finish(self, outcome: str, note: str) -> None:
        """Complete the record with the outcome (WRITTEN, IN_DOUBT, NOT_WRITTEN) and how it came about."""


@dataclass(frozen=True)
class HandWrite:
    """What became of a write by hand: the write, the value before it, the outcome and its note."""

    item: TagWrite
    old: QualifiedValue
    outcome: str
    note: str


def value_from_text(tag: TagDef, text: str) -> Any:
    """The value ``text`` stands for on ``tag``, for :meth:`TagService.prepare_write` to check.

    A typed tag takes the text as it is: the conversion rules read numbers (``"42"``, ``"2.5"``) and
    booleans (``true``/``false``/``on``/``off``/``1``/``0``) from text. An array tag takes a JSON list
    (``[1, 2.5, 3]``, ``["a", "b"]``, ``[]``), whose elements the same rules convert; anything else is
    a TagTypeError naming the tag. A tag only its device knows the type of takes the text too (its
    driver converts it for the node's type), or the list when the text is a JSON list; one with a
    ``min``/``max`` takes a number, which the range is checked against here.
    """
    if tag.array or (tag.data_type is None and text.lstrip().startswith("[")):
        return _json_list(tag, text)
    if tag.data_type is not None or (tag.min_value is None and tag.max_value is None):
        return text
    try:
        return to_number(text, tag.where)
    except TagTypeError:
        return text  # refused by the tag's own check, with its message


def _json_list(tag: TagDef, text: str) -> Any:
    """``text`` as a JSON list for an array tag (or a list typed for a tag the device types)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    else:
        if isinstance(value, list):
            return value
    if not tag.array:
        return text  # not a list after all: the device's conversion judges the text
    raise TagTypeError(f"{tag.where} is an array ({tag.type_text}): write a JSON list, e.g. [1, 2, 3], got "
                       f"{shown(text)}; nothing was written")


def plan_write(service: TagService, path: str, text: str) -> TagWrite:
    """The checked write of ``text`` to ``path``: UnknownTag, ReadOnlyTag, TagTypeError or TagRangeError
    naming the tag (nothing sent) when it is refused."""
    tag = service.tag(path)
    return service.prepare_write([tag.path], [value_from_text(tag, text)])[0]


class _Heard:
    """How the delivery went, in words for the audit and the person."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def written(self, items: Sequence[TagWrite], confirmed_by: str) -> None:
        if confirmed_by == "acknowledged":
            self.notes.append("acknowledged by the device")
        else:
            self.notes.append("its answer was lost; read back, the device holds the value")

    def in_doubt(self, items: Sequence[TagWrite], error: str, resolution: str) -> None:
        self.notes.append(f"in doubt ({error}): {resolution}")

    def failed(self, items: Sequence[TagWrite], quality: str, error: str) -> None:
        self.notes.append(f"not written ({quality})")


def write_once(
    service: TagService,
    item: TagWrite,
    old: QualifiedValue,
    audit: WriteAudit,
    *,
    waiting: Callable[[str, str, float, float], None] | None = None,
) -> HandWrite:
    """Record ``item`` in ``audit``, send it at most once, record the outcome; see the module doc.

    ``old`` is the tag's value before the write (for the record). ``waiting(device, reason, waited_s,
    timeout_s)`` hears the read-back of a write in doubt waiting for its device. Returns the written
    outcome; raises WriteInDoubt (recorded IN_DOUBT), CommunicationError, DeviceError or TagError
    (recorded NOT_WRITTEN), and anything that interrupts the sending (recorded IN_DOUBT).
    """
    audit.begin(item, old)
    heard = _Heard()
    hooks = WaitHooks(stop_requested=_no_wait) if waiting is None else WaitHooks(stop_requested=_no_wait,
                                                                                  waiting=waiting)
    try:
        service.deliver([item], listener=heard, hooks=hooks, resend_in_doubt=False)
    except WriteInDoubt as exc:
        finish_audit(audit, IN_DOUBT, str(exc))
        raise
    except (CommunicationError, DeviceError, TagError) as exc:  # not applied: never sent, or refused
        finish_audit(audit, NOT_WRITTEN, str(exc))
        raise
    except BaseException as exc:  # Ctrl-C (or a bug) while sending: the request may have gone out
        finish_audit(audit, IN_DOUBT, f"interrupted while sending ({exc.__class__.__name__}); it may have been applied")
        raise
    note = "; ".join(heard.notes) or "acknowledged by the device"
    finish_audit(audit, WRITTEN, note)
    return HandWrite(item, old, WRITTEN, note)


def confirm(service: TagService, item: TagWrite, timeout_s: float) -> tuple[QualifiedValue, float]:
    """Wait until the tag reads the written value: the reading and the seconds it took (ConfirmTimeout
    naming the tag, the value and the last one seen)."""
    started = time.monotonic()
    seen = service.wait_for_value(item.tag.path, item.value, timeout_s=timeout_s, poll_s=0.1)
    return seen, time.monotonic() - started


def _no_wait() -> str:
    return NO_WAIT


class _Finishing(Protocol):
    def finish(self, outcome: str, note: str) -> None: ...


def finish_audit(audit: _Finishing, outcome: str, note: str, what: str = "write") -> None:
    """Complete the audit record of a ``what`` by hand (a write, a call); a failure is logged, not
    raised: it must not hide what the write or the call did."""
    try:
        audit.finish(outcome, note)
    except Exception as exc:
        log.warning("the audit record of this %s could not be completed (%s): the %s's outcome is %s: %s",
                    what, exc, what, outcome, note)
