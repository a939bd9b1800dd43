"""A device method called by a person (``exchange tags call``): a workflow's checks, made at most once,
audited.

- The arguments typed are read as ``tags write`` reads a value (:func:`arguments_from_text`): each
  goes to the method as text, which the conversion rules read for the argument's declared type
  (``600``, ``2.5``, ``true``); a JSON list (``[1, 2.5]``) is a list, for an array argument, and a
  JSON string (``"600"``) is that text.
- The checks of a workflow's ``tags.call`` (:func:`exchange._tags.methods.call_method`): the tag is
  configured and ``access = "rw"`` (``"ro"`` forbids calls as it forbids writes), its device has
  methods, the method is on the object, and the arguments fit the method's declared
  InputArguments, in number and type. A call refused there sends nothing and records nothing.
- Made at most once (:func:`call_once`): a device that cannot be reached is not waited for (nothing
  was called, it fails at once); a call whose answer was lost may have run and is never made again
  (WriteInDoubt): a method call cannot be read back.
- Audited: :class:`CallAudit` records who, why, the tag, the method and its arguments durably right
  before the request goes out, once every check passed (a failing audit stops the call), and the
  outcome after it: ``CALLED`` (with the outputs), ``NOT_CALLED``, ``IN_DOUBT``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange._tags.delivery import WaitHooks
from exchange._tags.manual import IN_DOUBT, finish_audit
from exchange._tags.service import TagService
from exchange._tags.table import TagDef
from exchange.errors import CommunicationError, DeviceError, TagError, WriteInDoubt

__all__ = ["CALLED", "NOT_CALLED", "CallAudit", "HandCall", "arguments_from_text", "call_once"]

log = logging.getLogger(__name__)

CALLED = "CALLED"  # the device ran the method and answered
NOT_CALLED = "NOT_CALLED"  # refused by the device (its status code in the note), or it could not be reached
NO_WAIT = "a call by hand does not wait for the device"


class CallAudit(Protocol):
    """Where a call by hand is recorded (the store's audit log, for the command line)."""

    def begin(self, tag: TagDef, method: str, args: Sequence[Any]) -> None:
        """Record the call right before it is sent; raising stops it (nothing is sent)."""

    def finish(self, outcome: str, note: str) -> None:
        """Complete the record with the outcome (CALLED, IN_DOUBT, NOT_CALLED) and how it came about."""


@dataclass(frozen=True)
class HandCall:
    """What became of a call by hand: the tag, the method, its arguments and outputs, the outcome."""

    tag: TagDef
    method: str
    args: list[Any]
    outputs: list[Any]
    outcome: str
    note: str


def arguments_from_text(texts: Sequence[str]) -> list[Any]:
    """The values ``texts`` stand for as method arguments (module doc): a JSON list or string parsed,
    anything else the text as typed, for the argument's type to read."""
    found: list[Any] = []
    for text in texts:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        found.append(value if isinstance(value, (list, str)) else text)
    return found


def call_once(
    service: TagService,
    path: str,
    method: str,
    args: Sequence[Any],
    audit: CallAudit,
    *,
    before_send: Callable[[TagDef], None] | None = None,
) -> HandCall:
    """Call ``method`` of the object tag ``path`` names with ``args`` at most once, audited (module doc).

    ``before_send(tag)`` runs once every check passed, right before the audit record and the request
    (the command line asks there); raising stops the call, nothing recorded or sent. Returns the
    CALLED outcome; raises WriteInDoubt (recorded IN_DOUBT), CommunicationError or DeviceError
    (recorded NOT_CALLED once the record began), TagError or InvalidArgument (refused before anything
    was sent, not recorded), and anything that interrupts the sending (recorded IN_DOUBT).
    """
    tag = service.tag(path)
    began = False

    def sending() -> None:
        nonlocal began
        if began:  # the link was lost before the request went out: a person decides, not a retry
            raise CommunicationError(f"device {tag.device!r}: the call of {method} on {tag.path} was not made again")
        if before_send is not None:
            before_send(tag)
        audit.begin(tag, method, args)
        began = True

    hooks = WaitHooks(stop_requested=_no_wait, sending=sending)
    try:
        outputs = service.call(tag.path, method, args, hooks=hooks)
    except WriteInDoubt as exc:
        _finish(began, audit, IN_DOUBT, str(exc))
        raise
    except (CommunicationError, DeviceError, TagError) as exc:  # not made: never sent, or refused
        _finish(began, audit, NOT_CALLED, str(exc))
        raise
    except BaseException as exc:  # Ctrl-C (or a bug) while calling: the request may have gone out
        _finish(began, audit, IN_DOUBT, f"interrupted while calling ({exc.__class__.__name__}); it may have run")
        raise
    note = "outputs " + json.dumps(outputs, ensure_ascii=False, default=str) if outputs else "no outputs"
    _finish(began, audit, CALLED, f"called; {note}")
    return HandCall(tag, method, list(args), outputs, CALLED, f"called; {note}")


def _no_wait() -> str:
    return NO_WAIT


def _finish(began: bool, audit: CallAudit, outcome: str, note: str) -> None:
    """Complete the audit record when there is one (the call began)."""
    if began:
        finish_audit(audit, outcome, note, what="call")
