"""People's side of operator prompts: list them, answer one, verify (or send back) an answer.

Every surface (``exchange prompts`` / ``answer`` / ``verify``, the HTTP API, the console) goes
through these functions, by way of the runtime's methods. Who may act is decided here: ``role``
is the caller's role (None: a trusted local caller, the CLI on the gateway's machine, which is held
to no role); ``actor`` the name recorded. The same person cannot answer and verify.
"""

from __future__ import annotations

from typing import Any

from exchange._engine.prompt_fields import checked_answer
from exchange._engine.view_types import PromptView
from exchange._engine.views import iso, prompt_view
from exchange._roles import allows
from exchange._store import prompts as table
from exchange._store.store import Store
from exchange._timefmt import iso_utc
from exchange.errors import NotAllowed, PromptNotOpen, UnknownRun


def _timed_out(rec: table.PromptRecord) -> PromptNotOpen:
    assert rec.deadline_at is not None
    return PromptNotOpen(rec.run_id, rec.key, table.TIMED_OUT,
                         f"timed out at {iso(rec.deadline_at)} (not answered within "
                         f"{rec.deadline_at - rec.opened_at:g} s); it takes no answer or verification now")


def _not_open(run_id: str, key: str, change: table.Change, wanted: str) -> PromptNotOpen | UnknownRun:
    if change.run_status is None:
        return UnknownRun(run_id)
    if change.status is None:
        detail = "does not exist (the run has opened no prompt of that key)"
    elif change.run_status in ("SUCCESS", "ERROR", "CANCELLED"):
        detail = f"cannot be acted on: the run is {change.run_status}"
    elif change.prompt is not None and change.prompt.deadline_at is not None and (
            change.timed_out or change.status == table.TIMED_OUT):
        return _timed_out(change.prompt)
    elif change.status == table.AWAITING_VERIFICATION and wanted == table.OPEN:
        detail = f"was answered by {change.prompt.answered_by if change.prompt else '?'} and waits for verification"
    elif change.status == table.OPEN and wanted == table.AWAITING_VERIFICATION:
        detail = "has no answer waiting for verification"
    else:
        detail = f"is {change.status}, not open"
    return PromptNotOpen(run_id, key, change.status, detail)


def _run_status(store: Store, run_id: str) -> str | None:
    rec = store.runs.get(run_id)
    return None if rec is None else rec.status


def _past_deadline(store: Store, rec: table.PromptRecord) -> bool:
    """Whether ``rec`` waits for a person past its deadline, by this process's reading of the
    store's clock: a courtesy check for a clearer refusal; the store's own check decides."""
    return (rec.status in table.WAITING and rec.deadline_at is not None
            and store.clock.seconds_until(rec.deadline_at) <= 0)


def _require(role: str | None, needed: str, actor: str, what: str) -> None:
    if role is not None and not allows(role, needed):
        raise NotAllowed(f"{actor} ({role}) may not {what}: it needs the {needed} role")


def answer(store: Store, run_id: str, key: str, values: Any, *, actor: str, role: str | None,
           reason: str | None) -> PromptView:
    """Answer the open prompt ``key`` of ``run_id``; returns the prompt afterwards (status ANSWERED,
    or AWAITING_VERIFICATION when it asks for a second person). PromptNotOpen, AccessError (role
    below the prompt's), InvalidAnswer (a value that breaks its field; nothing stored)."""
    rec = store.prompts.get(run_id, key)
    if rec is None:
        raise _not_open(run_id, key, table.Change(False, None, _run_status(store, run_id)), table.OPEN)
    _require(role, rec.role, actor, f"answer prompt {key!r}")
    if _past_deadline(store, rec):  # said first: a value fixed after a refusal would be refused anyway
        raise _timed_out(rec)
    values = checked_answer(rec.fields, values)
    verify = rec.verify_role is not None

    def message(now: float) -> dict[str, Any]:
        return {"values": values, "by": actor, "verified_by": None, "at": iso_utc(now), "reason": reason}

    change = store.prompts.answer(run_id, key, values, actor=actor, reason=reason, verify=verify,
                                  message=None if verify else message)
    if not change.done or change.prompt is None:
        raise _not_open(run_id, key, change, table.OPEN)
    return prompt_view(change.prompt)


def verify(store: Store, run_id: str, key: str, *, actor: str, role: str | None, reason: str | None,
           reject: bool = False) -> PromptView:
    """Verify (or, with ``reject``, send back: the prompt opens again) the answer waiting for
    verification; returns the prompt afterwards. AccessError for the person who answered or a role
    below the prompt's ``verify_role``; PromptNotOpen when no answer waits."""
    rec = store.prompts.get(run_id, key)
    if rec is None or rec.status != table.AWAITING_VERIFICATION:
        change = table.Change(False, None if rec is None else rec.status, _run_status(store, run_id), rec)
        raise _not_open(run_id, key, change, table.AWAITING_VERIFICATION)
    assert rec.verify_role is not None
    _require(role, rec.verify_role, actor, f"verify prompt {key!r}")
    if rec.answered_by == actor:
        raise NotAllowed(f"{actor} answered prompt {key!r}: a second, different person must verify it")
    if reject:
        change = store.prompts.reject(run_id, key, actor=actor, reason=reason)
    else:
        def verified(now: float) -> dict[str, Any]:
            return {"values": rec.answer, "by": rec.answered_by, "verified_by": actor, "at": iso(rec.answered_at),
                    "verified_at": iso_utc(now), "reason": rec.answer_reason, "verify_reason": reason}

        change = store.prompts.verify(run_id, key, actor=actor, reason=reason, message=verified)
    if not change.done or change.prompt is None:
        if change.prompt is not None and change.prompt.answered_by == actor:  # answered anew by this person
            raise NotAllowed(f"{actor} answered prompt {key!r}: a second, different person must verify it")
        raise _not_open(run_id, key, change, table.AWAITING_VERIFICATION)
    return prompt_view(change.prompt)
