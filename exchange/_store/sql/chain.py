"""The hash chain of a run's audit trail: what one link covers, and how its hash is spelled.

Every event of a run (commands with their actors and reasons, status changes, prompts' answers, ...)
and every write of a step record is a link of the run's chain. A link's hash is::

    sha256_hex(previous head || canonical JSON of the entry's stored fields || "|" || replaced)

where the previous head is the run's ``audit_head`` before the link ("" for the first), and
``replaced`` is "" but for a step row written again (below). The database computes it, in the same
statements that write the entry (:mod:`~exchange._store.sql.event_statements`,
:mod:`~exchange._store.sql.step_statements`): the run's row is updated first (``audit_seq`` + 1,
``audit_prev``, ``audit_head``), which on PostgreSQL locks it, so that the event a gateway's
executor writes and the command an operator sends to the same run take their places one after the
other; the entry then copies its place (``chain_seq``), the head before it (``chain_prev``) and its
hash (``chain_hash``) from the run's row. No round trip, no commit and no fsync of its own: two
statements in the unit that writes the entry on SQLite, one on PostgreSQL (the UPDATE ... RETURNING
the link in the WITH of the INSERT or UPDATE of the entry; the one-statement start and claim of a
run chain their RUNNING status event the same way). SQLite computes the hash with a function Exchange
registers on each of its connections (``exchange_sha256``); PostgreSQL with its own ``sha256``.

Steps are written in place (RETRYING or STARTED, then SUCCESS or ERROR): each write is a link, so a
step's every state is chained as it is written, and the check covers the state people see. The row
keeps only its latest link; the places its earlier links took are listed in its ``chain_replaced``
("3,7"), which that latest link's hash covers: a place no entry holds and no step says it replaced
is an entry deleted outside Exchange. The history of progress messages (events of kind
``progress``, pruned to their length by Exchange itself) is not chained: it is not part of the audit.

What the check (:mod:`exchange._store.runs.audit_chain`) detects: a changed field of an event or a
step (its hash no longer matches), a deleted one (its place is empty, or its successor's
``chain_prev`` names a hash nothing has), and a deleted or changed newest one (the run row's
``audit_seq``/``audit_head`` cover it). It is evidence against edits made outside Exchange, not
against someone who recomputes every hash (there is no secret in it).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The event kinds that are not links: the progress history, which Exchange prunes itself.
UNCHAINED_EVENT_KINDS = frozenset({"progress"})
SQLITE_SHA256 = "exchange_sha256"


def sha256_hex(text: str) -> str:
    """The SQLite function's body, and the check's: sha256 of ``text``'s UTF-8, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _time(value: Any) -> float | None:
    return None if value is None else float(value)


def _blob(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()


# ASCII only: the database's UTF-8 of it is the same bytes as Python's. One encoder for every entry:
# json.dumps with these arguments builds one per call (a fifth of a check's time), and even a kept
# JSONEncoder builds its C encoder at each call (half the time of a step's entry); the C encoder
# kept gives the same text (the fallback, on a Python without it, is json.dumps's own code).
_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
if _C_ENCODER is not None:
    _ENTRIES = _C_ENCODER(None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)

    def _canonical(fields: list[Any]) -> str:
        return "".join(_ENTRIES(fields, 0))
else:  # pragma: no cover - CPython has the C encoder
    _ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode

    def _canonical(fields: list[Any]) -> str:
        return _ENCODE(fields)


def json_text(value: Any) -> str:
    """``value`` as an entry spells it (a statement that builds an entry in SQL takes these parts)."""
    return _canonical([value])[1:-1]


def event_entry(run_id: str, kind: str, at: Any, actor: str | None, reason: str | None, step_seq: int | None,
                payload: str | None) -> str:
    """The canonical JSON of an event as stored (its id apart: it is given by the database)."""
    return _canonical(["event", run_id, kind, _time(at), actor, reason, step_seq, payload])


def step_entry(params: dict[str, Any]) -> str:
    """The canonical JSON of a step row as stored, from its statement's parameters or its row."""
    return _canonical([
        "step", params["run_id"], params["seq"], params["name"], params["status"], params["attempts"],
        params["output"], params["error_type"], params["error_message"], _blob(params["error_blob"]),
        params["skipped_ops"], _time(params["next_attempt_at"]), _time(params["started_at"]),
        _time(params["finished_at"]), 1 if params["side_effect"] else None,
    ])


def head_moved(sha256_sql: str, entry_sql: str, *, table: str = "") -> str:
    """The SET list that moves a run's head one link on, over the entry whose SQL text is
    ``entry_sql`` (``sha256_sql``: the backend's spelling of the hash, ``{}`` for its argument;
    ``table``: the runs table's name where the columns must be qualified). Every chained statement
    spells the head's move with it."""
    column = f"{table}." if table else ""
    head = sha256_sql.format(f"COALESCE({column}audit_head, '') || {entry_sql}")
    return (f"audit_seq = COALESCE({column}audit_seq, 0) + 1, audit_prev = {column}audit_head, "
            f"audit_head = {head}")


def link_hash(prev: str | None, entry: str, replaced: str | None) -> str:
    """A link's hash, as the database computes it."""
    return sha256_hex(f"{prev or ''}{entry}|{replaced or ''}")


def register_sqlite_function(dbapi_conn: Any) -> None:
    """Give a sqlite3 connection the hash the chained statements call."""
    dbapi_conn.create_function(SQLITE_SHA256, 1, sha256_hex, deterministic=True)
