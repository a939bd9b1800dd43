"""People's side of operator prompts: list them, answer one, verify (or send back) an answer.

Every surface (``exchange prompts`` / ``answer`` / ``verify``, the HTTP API, the console) goes
through these functions, by way of the runtime's methods. Who may act is decided here: ``role``
is the caller's role (None: a trusted local caller, the CLI without ``--user``, which is held to no
role), which needs the ``answer`` (``verify``) right and to clear the prompt's ``role``
(``verify_role``), see :meth:`exchange._roles.Roles.may`; ``actor`` the name recorded; ``person``
False for a program (an API token).

Two-person verification is between two persons: the verifier is never the answerer as a person
(:func:`~exchange._actors.same_person`: names compared without case, ``olga@vm`` taken to be
``olga``), and a program takes no part in it: it may neither verify (nor send back) an answer, nor
answer a prompt that a second person verifies (who would the first person be?). A role without the
right (a viewer) acts on no prompt: it is refused before any prompt is looked up, so it learns
nothing about them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from exchange._actors import same_person
from exchange._arguments import shown
from exchange._engine.definition import checked_answer
from exchange._engine.model import PromptView
from exchange._engine.operator.views import iso, prompt_view
from exchange._roles import ANSWER, VERIFY, Roles
from exchange._store import AWAITING_VERIFICATION, OPEN, TIMED_OUT, WAITING, Change, PromptRecord, Store
from exchange._timefmt import iso_utc
from exchange.errors import InvalidAnswer, NotAllowed, PromptNotOpen, StoreDataError, StoreError, UnknownRun

log = logging.getLogger(__name__)


def _timed_out(rec: PromptRecord) -> PromptNotOpen:
    assert rec.deadline_at is not None
    return PromptNotOpen(rec.run_id, rec.key, TIMED_OUT,
                         f"timed out at {iso(rec.deadline_at)} (not answered within "
                         f"{rec.deadline_at - rec.opened_at:g} s); it takes no answer or verification now")


def _not_open(run_id: str, key: str, change: Change, wanted: str) -> PromptNotOpen | UnknownRun:
    if change.run_status is None:
        return UnknownRun(run_id)
    if change.status is None:
        detail = "does not exist (the run has opened no prompt of that key)"
    elif change.run_status in ("SUCCESS", "ERROR", "CANCELLED"):
        detail = f"cannot be acted on: the run is {change.run_status}"
    elif change.prompt is not None and change.prompt.deadline_at is not None and (
            change.timed_out or change.status == TIMED_OUT):
        return _timed_out(change.prompt)
    elif change.status == AWAITING_VERIFICATION and wanted == OPEN:
        detail = f"was answered by {change.prompt.answered_by if change.prompt else '?'} and waits for verification"
    elif change.status == OPEN and wanted == AWAITING_VERIFICATION:
        detail = "has no answer waiting for verification"
    else:
        detail = f"is {change.status}, not open"
    return PromptNotOpen(run_id, key, change.status, detail)


def _run_status(store: Store, run_id: str) -> str | None:
    rec = store.runs.get(run_id)
    return None if rec is None else rec.status


def _past_deadline(store: Store, rec: PromptRecord) -> bool:
    """Whether ``rec`` waits for a person past its deadline, by this process's reading of the
    store's clock: a courtesy check for a clearer refusal; the store's own check decides."""
    return (rec.status in WAITING and rec.deadline_at is not None
            and store.clock.seconds_until(rec.deadline_at) <= 0)


def _require(roles: Roles, role: str | None, right: str, floor: str | None, actor: str, what: str) -> None:
    if role is None or roles.may(role, right, floor):
        return
    if floor is None or not roles.may(role, right):
        raise NotAllowed(roles.refusal(role, right, actor, what))
    raise NotAllowed(f"{actor} ({role}) may not {what}: it needs the {floor} role or above")


def _not_a_person(actor: str, what: str) -> NotAllowed:
    return NotAllowed(f"{actor} is a program (an API token), not a person, and may not {what}: two-person "
                      "verification needs two persons, each an Exchange user with their password")


Signer = Callable[[], dict[str, Any]] | None  # the signature to store with the change, made after the checks


def _checked(store: Store, rec: PromptRecord, values: Any, *, actor: str, reason: str | None) -> Any:
    """``values`` checked against the prompt's fields. A refused answer is re-raised, and first
    logged as the run's event ``answer_refused`` (a link of its audit chain): a value out of range
    that a person tried to give is a thing QA reviews by exception, even though nothing was answered."""
    try:
        return checked_answer(rec.fields, values)
    except InvalidAnswer as exc:
        if rec.status != OPEN:  # it takes no answer at all: nothing was refused for its values
            raise
        refused = {"key": rec.key, "field": _storable(exc.field), "problem": _storable(exc.problem),
                   "given": _storable(shown(values))}
        try:
            store.events.add(rec.run_id, "answer_refused", refused, actor=actor, reason=_storable(reason))
        except (StoreError, StoreDataError) as lost:  # the caller hears of the refusal all the same
            log.warning("run %s: the refused answer to %s could not be logged: %s", rec.run_id, rec.key, lost)
        raise


def _storable(text: str | None) -> str | None:
    # A refused answer may hold what the store cannot: a lone surrogate is kept as its escape.
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def answer(store: Store, run_id: str, key: str, values: Any, *, actor: str, role: str | None, roles: Roles,
           reason: str | None, person: bool = True, signer: Signer = None) -> PromptView:
    """Answer the open prompt ``key`` of ``run_id``; returns the prompt afterwards (status ANSWERED,
    or AWAITING_VERIFICATION when it asks for a second person). PromptNotOpen, NotAllowed (a
    role without the ``answer`` right, before anything is looked up; a role below the prompt's; a
    program, ``person`` False, answering a prompt that is verified), InvalidAnswer (a value that
    breaks its field; nothing answered, the refusal logged as the event ``answer_refused``)."""
    _require(roles, role, ANSWER, None, actor, "answering prompts")
    rec = store.prompts.get(run_id, key)
    if rec is None:
        raise _not_open(run_id, key, Change(False, None, _run_status(store, run_id)), OPEN)
    _require(roles, role, ANSWER, rec.role, actor, f"answer prompt {key!r}")
    if _past_deadline(store, rec):  # said first: a value fixed after a refusal would be refused anyway
        raise _timed_out(rec)
    if rec.verify_role is not None and not person:
        raise _not_a_person(actor, f"answer prompt {key!r}, which a second person verifies")
    values = _checked(store, rec, values, actor=actor, reason=reason)
    verify = rec.verify_role is not None

    def message(now: float) -> dict[str, Any]:
        return {"values": values, "by": actor, "verified_by": None, "at": iso_utc(now), "reason": reason}

    change = store.prompts.answer(run_id, key, values, actor=actor, reason=reason, verify=verify,
                                  message=None if verify else message, signature=None if signer is None else signer())
    if not change.done or change.prompt is None:
        raise _not_open(run_id, key, change, OPEN)
    return prompt_view(change.prompt)


def _answered_by_same_person(actor: str, key: str, answered_by: str) -> NotAllowed:
    same = "" if answered_by == actor else f" (as {answered_by})"
    return NotAllowed(f"{actor} answered prompt {key!r}{same}: a second, different person must verify it")


def verify(store: Store, run_id: str, key: str, *, actor: str, role: str | None, roles: Roles,
           reason: str | None, reject: bool = False, person: bool = True, signer: Signer = None) -> PromptView:
    """Verify (or, with ``reject``, send back: the prompt opens again) the answer waiting for
    verification; returns the prompt afterwards. NotAllowed for a role without the ``verify`` right
    or a program (``person`` False), before anything is looked up; for the person who answered
    (whatever name they answered under, see :func:`~exchange._actors.same_person`) or a role below
    the prompt's ``verify_role``. PromptNotOpen when no answer waits, or the answer changed meanwhile."""
    what = "send back answers" if reject else "verify answers"
    _require(roles, role, VERIFY, None, actor, "sending back answers" if reject else "verifying answers")
    if not person:
        raise _not_a_person(actor, what)
    rec = store.prompts.get(run_id, key)
    if rec is None or rec.status != AWAITING_VERIFICATION or rec.answered_by is None:
        change = Change(False, None if rec is None else rec.status, _run_status(store, run_id), rec)
        raise _not_open(run_id, key, change, AWAITING_VERIFICATION)
    assert rec.verify_role is not None
    _require(roles, role, VERIFY, rec.verify_role, actor, f"verify prompt {key!r}")
    if same_person(rec.answered_by, actor):
        raise _answered_by_same_person(actor, key, rec.answered_by)
    signature = None if signer is None else signer()
    if reject:
        change = store.prompts.reject(run_id, key, actor=actor, reason=reason, answered_by=rec.answered_by,
                                      signature=signature)
    else:
        def verified(now: float) -> dict[str, Any]:
            return {"values": rec.answer, "by": rec.answered_by, "verified_by": actor, "at": iso(rec.answered_at),
                    "verified_at": iso_utc(now), "reason": rec.answer_reason, "verify_reason": reason}

        change = store.prompts.verify(run_id, key, actor=actor, reason=reason, answered_by=rec.answered_by,
                                      message=verified, signature=signature)
    if not change.done or change.prompt is None:
        current = change.prompt
        if (not change.timed_out and current is not None and current.status == AWAITING_VERIFICATION
                and current.answered_by is not None):
            if same_person(current.answered_by, actor):  # sent back and answered anew, by this person
                raise _answered_by_same_person(actor, key, current.answered_by)
            raise PromptNotOpen(run_id, key, current.status, f"was answered anew by {current.answered_by} while "
                                f"{actor} verified the answer of {rec.answered_by}: look at the new answer first")
        raise _not_open(run_id, key, change, AWAITING_VERIFICATION)
    return prompt_view(change.prompt)
