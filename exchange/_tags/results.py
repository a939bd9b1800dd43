"""What the tag steps and ``exchange tag`` hand back, as TypedDicts: mypy checks the places that build
them, while at run time they are plain dicts (a step's output is stored as JSON, unchanged).

A reading alone is :class:`~exchange._values.model.TagReading`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from exchange._values.model import TagReading

__all__ = ["PathReading", "TagCallResult", "TagWaitResult", "TagWriteResult", "WriteConfirmResult",
           "WriteOutcome"]


class PathReading(TagReading):
    """A reading with the tag's path (``exchange tag read --json``)."""

    path: str


class TagWaitResult(PathReading):
    """``wait.until_tag`` / ``wait.until_tag_equals``: the reading that met the condition, how long
    the wait took (holds included), how many HOLDs it honoured and how long it was held."""

    elapsed_ms: float
    holds: int
    held_ms: float


class TagWriteResult(TypedDict):
    """``tags.write``: the value as written (converted to the tag's type), quality ``Good`` and the
    time the step finished the write (ISO 8601 UTC)."""

    path: str
    value: Any
    quality: str
    timestamp: str


class TagCallResult(TypedDict):
    """``tags.call``: the method called on the object at ``path`` and its output arguments in order."""

    path: str
    method: str
    outputs: list[Any]


class WriteConfirmResult(TypedDict):
    """``tags.write_confirm``: the value written to ``path`` and read back at ``confirm_path``,
    ``elapsed_ms`` from the write to the confirmation."""

    confirmed: bool
    path: str
    value: Any
    confirm_path: str
    elapsed_ms: float


class WriteOutcome(TypedDict):
    """``exchange tag write --json``: one write, the reading before it, what became of it and the
    audit entry that records it (``confirmed``: whether ``--confirm`` read it back, None without)."""

    path: str
    device: str
    address: str
    value: Any
    old: TagReading
    outcome: str
    note: str
    audit_id: int | None
    confirmed: bool | None
