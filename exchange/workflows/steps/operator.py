"""``operator.prompt``: ask people for values in the middle of a run, typed and checked, optionally
verified by a second person::

    from exchange.workflows.steps import operator

    answer = operator.prompt(
        "lab_result", "Enter the lab result for batch B-200",
        fields={"density": {"type": "float", "min": 0.9, "max": 1.2, "unit": "g/cm3"},
                "approved": {"type": "bool"},
                "grade": {"type": "choice", "choices": ["A", "B", "C"]},
                "note": {"type": "text", "required": False}},
        role="operator", verify_role="engineer")
    if not answer["values"]["approved"]:
        ...

The run waits, without cost, until someone with at least ``role`` answers (``exchange answer``, the
HTTP API, the console) and, with ``verify_role``, a second, different person with at least that role
verifies the answer. A value that breaks its field is refused to whoever typed it, naming the
field, and the prompt stays open. The answer is recorded: a run resumed after a crash or a takeover
gets it back without asking again, and a prompt answered while no gateway executed the run is found
when it resumes.
"""

from __future__ import annotations

import math
from typing import Any

from exchange._arguments import shown
from exchange._arguments import text as checked_text
from exchange._engine import checked_fields, current_run, prompt_in_run, store_guard
from exchange._roles import ROLES, VIEWER
from exchange.errors import AbortRequested, InvalidArgument, OutsideRunError, PromptTimeout, StopRequested

__all__ = ["AbortRequested", "PromptTimeout", "StopRequested", "prompt"]

_CALL = "operator.prompt"
KEY_MAX_CHARS = 200  # the store's column
TEXT_MAX_CHARS = 2000
ANSWERING_ROLES = tuple(role for role in ROLES if role != VIEWER)  # a viewer acts on nothing


def _role(name: str, value: Any, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if isinstance(value, str) and value.strip().lower() in ANSWERING_ROLES:
        return value.strip().lower()
    raise InvalidArgument(f"{_CALL}: {name} must be one of {', '.join(ANSWERING_ROLES)}"
                          f"{' or None' if optional else ''}, got {shown(value)}")


@store_guard
def prompt(key: str, text: str, fields: dict[str, dict[str, Any]], role: str = "operator",
           verify_role: str | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Open the prompt ``key`` (unique within the run) showing ``text`` and the form ``fields``, and
    wait for its answer: ``{"values": {field: value}, "by": who answered, "verified_by": who
    verified (None without ``verify_role``), "at": when it was answered (ISO 8601, UTC), "reason":
    the answerer's reason}``. Every field has a value: a missing optional one its ``default`` or None.

    Fields: ``{"type": "float" | "int", "min", "max", "unit"}``, ``{"type": "bool"}``, ``{"type":
    "choice", "choices": [...]}``, ``{"type": "text", "max_chars", "pattern"}`` (``pattern``: a
    regular expression the whole answer must match, e.g. ``r"^L-\\d{6}$"``); each may say
    ``"required": False`` (default True), give a ``default`` and a ``label`` (shown instead of the
    field's name, which stays the key). Blank text is no value (refused when required, None when
    optional); text may hold tabs and line breaks but no other control character.
    ``role``/``verify_role``: operator, engineer or admin. ``timeout_s``: None (wait until
    answered) or a number of seconds > 0, after which PromptTimeout is raised and the prompt
    closed; the store refuses answers after that deadline even while no gateway runs the run. A
    STOP sent while the prompt waits ends it with StopRequested, an ABORT with AbortRequested (a
    StopRequested too); other commands stay for the next ``recvCommand``; a cancel ends the run.

    Called in the workflow body (OperationInStepError inside a step, OutsideRunError outside a
    run); InvalidArgument for a bad argument, before anything is written."""
    ctx = current_run()
    if ctx is None:
        raise OutsideRunError(f"{_CALL}() can only be called inside a workflow run")
    key = checked_text(_CALL, "key", key, max_chars=KEY_MAX_CHARS)
    if "/" in key:  # it names the prompt in URLs (/runs/RUN/prompts/KEY) and OPC UA browse paths
        raise InvalidArgument(f"{_CALL}: key must not contain '/', got {key!r}")
    text = checked_text(_CALL, "text", text, max_chars=TEXT_MAX_CHARS)
    checked = checked_fields(fields)
    answering = _role("role", role, optional=False)
    assert answering is not None
    verifying = _role("verify_role", verify_role, optional=True)
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                  or not math.isfinite(timeout_s) or timeout_s <= 0):
        raise InvalidArgument(f"{_CALL}: timeout_s must be None or a finite number of seconds > 0, "
                              f"got {shown(timeout_s)}")
    return prompt_in_run(ctx, key, text, checked, answering, verifying,
                                   None if timeout_s is None else float(timeout_s))
