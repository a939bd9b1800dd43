"""Electronic signatures of a run's record: sign, release, the signatures an action requires, and
the review of finished runs not yet released (``Runtime.sign``, ``release``, ``signatures``,
``review``; the surfaces authenticate the signer with their password first).

What a signature binds (docs/batch-record.md): ``record_hash`` is the sha256 (hex) of the run's
batch record (``Runtime.record``) in canonical JSON (:func:`canonical_json`: keys sorted, no
spaces, ASCII) *as it was when signed*: read at the chain head ``audit_head``, its ``signatures``
holding the signatures made before this one. The record is read twice over if its head moved
while it was read, so that it is the record of one head. A signature made on its own (sign,
release) is written only if the run's head is still that one (:meth:`SignatureTable.add`): its
event is the link right after ``audit_head``, nothing comes between. For a finished run, where
only signatures are added, :func:`record_as_signed` gives the document back from today's record,
and :func:`recomputed` says whether each signature's hash still matches.

A signature an action requires (``[signatures] required_for``: a verification, an answer, a
command, a cancel) binds the record as the signer saw it, just before the action: its hash is
computed before the action is written, and it is stored in the action's own event, in its commit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exchange._arguments import text as checked_text
from exchange._engine.operator.views import iso
from exchange._store import RELEASE_EVENT, SIGNATURE_EVENT, EventRecord, RunRecord, Store, codec
from exchange.errors import InvalidArgument, NotAllowed, WorkflowError

SIGN_ACTION, RELEASE_ACTION = "sign", "release"
RELEASED_MEANING = "released"
SIGNATURE_MEANING_MAX_CHARS = 200  # the API's and the console's too
NAME_MAX_CHARS = 200
HEAD_TRIES = 5  # reads of a record whose head keeps moving (a busy running run) before giving up
# The events that may carry a signature: their own (sign, release), or under ``signature`` (an action's).
SIGNED_EVENT_KINDS = (SIGNATURE_EVENT, RELEASE_EVENT, "prompt_verified", "prompt_rejected", "prompt_answered",
                      "command_sent", "cancel")

Signer = Callable[[], dict[str, Any]] | None  # makes the signature an action stores, after the action's checks


@dataclass(frozen=True)
class Signing:
    """A person signing: ``user`` the Exchange user whose password the caller checked just now
    (never an operating-system account), ``meaning`` what the signature means (None: the action's
    default), ``name`` the printed name (the account's full name; None: the user name)."""

    user: str
    meaning: str | None = None
    name: str | None = None


def canonical_json(document: Any) -> str:
    """The one spelling a record is hashed in: keys sorted, no spaces, ASCII only."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def record_hash(record: dict[str, Any]) -> str:
    """sha256 hex of the record's canonical JSON."""
    return hashlib.sha256(canonical_json(record).encode("ascii")).hexdigest()


def checked_meaning(call: str, meaning: Any) -> str:
    found = checked_text(call, "meaning", meaning, max_chars=SIGNATURE_MEANING_MAX_CHARS).strip()
    if not found:
        raise InvalidArgument(f"{call}: meaning is empty: say what the signature means (reviewed, approved, ...)")
    return found


def _signature(signing: Signing, action: str, meaning: str, record: dict[str, Any]) -> dict[str, Any]:
    return {"action": action, "meaning": meaning, "name": signing.name or signing.user,
            "record_hash": record_hash(record), "audit_head": record.get("audit_head")}


def action_signature(store: Store, run_id: str, build: Callable[[], dict[str, Any]], signing: Signing,
                     action: str, meaning: str) -> dict[str, Any]:
    """The signature an action carries in its event: the record as it is now, hashed."""
    return _signature(signing, action, meaning, _one_head(store, run_id, build))


def _one_head(store: Store, run_id: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for _ in range(HEAD_TRIES):
        before = store.chains.head(run_id)
        record = build()
        if record.get("audit_head") == before:
            return record
    return record  # a busy run: the record read last, with the head it names


def sign_alone(store: Store, run_id: str, build: Callable[[], dict[str, Any]], signing: Signing, *,
               kind: str, action: str, meaning: str) -> dict[str, Any]:
    """Store a signature on its own (``kind``: a signature or a release), right after the head of
    the record it hashes; returns its view. UnknownRun, WorkflowError (a release refused, or a
    record that kept changing)."""
    for _ in range(HEAD_TRIES):
        record = _one_head(store, run_id, build)
        payload = _signature(signing, action, meaning, record)
        if store.signatures.add(run_id, kind, payload, actor=signing.user, expect_head=record.get("audit_head")):
            # The event written: the newest of its kind whose link follows the head signed.
            written = [e for e in store.events.list(run_id, kinds=[kind], limit=10)
                       if e.actor == signing.user and codec.loads(e.payload) == payload]
            return signature_view(written[-1], payload)
    raise WorkflowError(f"run {run_id}: its record changed each time it was about to be signed ({HEAD_TRIES} "
                        "times: the run is busy); nothing signed, try again")


def signature_view(event: EventRecord, signature: dict[str, Any], prompt: str | None = None) -> dict[str, Any]:
    """A signature as the record lists it."""
    return {"user": event.actor, "name": signature.get("name") or event.actor, "meaning": signature.get("meaning"),
            "action": signature.get("action"), "at": iso(event.at), "record_hash": signature.get("record_hash"),
            "audit_head": signature.get("audit_head"), "prompt": prompt, "event_id": event.id}


def signatures_of(decoded: list[tuple[EventRecord, Any]]) -> list[dict[str, Any]]:
    """Every signature among a run's decoded events, oldest first."""
    found = []
    for event, payload in decoded:
        if event.kind not in SIGNED_EVENT_KINDS or not isinstance(payload, dict):
            continue
        if event.kind in (SIGNATURE_EVENT, RELEASE_EVENT):
            found.append(signature_view(event, payload))
        elif isinstance(payload.get("signature"), dict):
            key = payload.get("key")
            found.append(signature_view(event, payload["signature"], None if key is None else str(key)))
    return found


def read_signatures(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The run's signatures, oldest first (a read of its events that may carry one)."""
    events = store.events.list(run_id, kinds=SIGNED_EVENT_KINDS, limit=1_000_000)
    return signatures_of([(e, codec.loads(e.payload)) for e in events])


def record_as_signed(record: dict[str, Any], index: int) -> dict[str, Any]:
    """The document signature ``index`` of ``record["signatures"]`` hashed, for a signature made on
    its own while nothing but signatures came after it (a finished run): the record with only the
    signatures before it, in its list and its prompts', and the head it names."""
    signature = record["signatures"][index]
    earlier = {s["event_id"] for s in record["signatures"][:index]}
    document = dict(record, signatures=record["signatures"][:index], audit_head=signature["audit_head"])
    document["prompts"] = [dict(p, signatures=[s for s in p["signatures"] if s["event_id"] in earlier])
                           for p in record["prompts"]]
    return document


def recomputed(record: dict[str, Any]) -> list[bool | None]:
    """Per signature of ``record``: whether its hash is the hash of :func:`record_as_signed` (None
    for an action's signature, which hashed the record before its action and cannot be rebuilt
    from today's)."""
    return [record_hash(record_as_signed(record, i)) == s["record_hash"]
            if s["action"] in (SIGN_ACTION, RELEASE_ACTION) else None
            for i, s in enumerate(record["signatures"])]


def required_refusal(action: str, run_id: str) -> NotAllowed:
    """The refusal of an action ``[signatures] required_for`` lists, tried without a signature."""
    return NotAllowed(f"{action} of run {run_id} needs an electronic signature ([signatures] required_for lists "
                      f"{action!r}): the signer's Exchange user name and password, given with the action "
                      "(CLI: --user NAME; API: \"signature\": {\"password\": ..., \"meaning\": ...}); nothing done")


def action_signer(store: Store, run_id: str, build: Callable[[], dict[str, Any]], signing: Signing | None,
                  action: str, *, required: bool, default_meaning: str,
                  call: str) -> Signer:
    """What signs ``action`` of ``run_id``: None when unsigned and not ``required``, else a function
    that hashes the record and gives the signature to store with the action (called after the
    action's own checks). NotAllowed (nothing done) when required and unsigned; InvalidArgument
    for a meaning or user that cannot be stored."""
    if signing is None:
        if required:
            raise required_refusal(action, run_id)
        return None
    checked_text(call, "user", signing.user, max_chars=NAME_MAX_CHARS)
    meaning = default_meaning if signing.meaning is None else checked_meaning(call, signing.meaning)
    return lambda: action_signature(store, run_id, build, signing, action, meaning)


def review(store: Store, parts: Callable[[RunRecord], tuple[list[dict[str, Any]], list[dict[str, Any]]]], *,
           pending: bool, limit: int) -> list[dict[str, Any]]:
    """Finished runs for QA's review: ``run``, ``workflow``, ``status``, ``finished_at``,
    ``exceptions`` (their count), ``exception_kinds`` (kind -> count), ``signatures`` (their
    count), ``released`` (the release, or None). ``pending``: only the runs not released yet, the
    oldest finished first; else every finished run, the newest first. ``parts``: a run's exceptions
    and signatures, as its record lists them (record_views.review_parts)."""
    found = []
    for rec in store.signatures.finished(limit, pending=pending):
        exceptions, signed = parts(rec)
        kinds: dict[str, int] = {}
        for item in exceptions:
            kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
        released = next((s for s in signed if s["action"] == RELEASE_ACTION), None)
        found.append({"run": rec.id, "workflow": rec.workflow, "status": rec.status,
                      "finished_at": iso(rec.finished_at), "exceptions": len(exceptions),
                      "exception_kinds": kinds, "signatures": len(signed), "released": released})
    return found
