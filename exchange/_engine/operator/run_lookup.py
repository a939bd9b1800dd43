"""Naming runs the way people do: a unique prefix of the id, and the filters of a listing.

A run id is a 36-character UUID; people copy the first eight characters that ``exchange run`` and
``follow`` print, or fewer. :func:`resolve_run_id` expands a prefix of at least
:data:`PREFIX_MIN_CHARS` hex digits (and hyphens, any case) that exactly one run's id starts with,
and refuses one that several start with (:class:`~exchange.errors.AmbiguousRun`, naming a few). The
store answers with one indexed query, whatever the number of runs.

A prefix cannot come to name another run than the one it named: ids are never reused, so a unique
prefix can only become ambiguous when newer runs share it. Programs that keep ids keep whole ones.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from exchange._arguments import shown
from exchange._arguments import text as checked_text
from exchange._engine.operator.limits import CODE_VERSION_MAX_CHARS, PREFIX_MIN_CHARS, RUN_ID_CHARS, STATE_MAX_CHARS
from exchange._store import RunFilter, Store
from exchange._store import records as r
from exchange.errors import AmbiguousRun, InvalidArgument, UnknownRun, WorkflowError

AMBIGUOUS_SHOWN = 4  # candidates named in the error of an ambiguous prefix
NAME_MAX_CHARS = 200  # the store's column for a workflow name

_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]*")


def resolve_run_id(store: Store, run_id: str) -> str:
    """The run id ``run_id`` names: itself when it is a whole id (or cannot be a prefix: the caller's
    lookup then says UnknownRun), else the one id it is a unique prefix of. UnknownRun when no id
    starts with it, AmbiguousRun when several do. An id shorter than :data:`PREFIX_MIN_CHARS` is an
    UnknownRun that says so (every id is a whole UUID, so none is that short)."""
    if len(run_id) < PREFIX_MIN_CHARS:
        raise UnknownRun(run_id, f"a run id prefix needs at least {PREFIX_MIN_CHARS} characters "
                                 f"(a whole run id has {RUN_ID_CHARS} characters)")
    lowered = run_id.lower()
    if len(run_id) >= RUN_ID_CHARS or not _PREFIX.fullmatch(lowered):
        return lowered if len(run_id) == RUN_ID_CHARS and _PREFIX.fullmatch(lowered) else run_id
    found = store.lookup.with_prefix(lowered, AMBIGUOUS_SHOWN + 1)
    if not found:
        raise UnknownRun(run_id)
    if len(found) == 1:
        return found[0].id
    count = len(found) if len(found) <= AMBIGUOUS_SHOWN else store.lookup.count_with_prefix(lowered)
    raise AmbiguousRun(run_id, [(c.id, c.workflow, c.status) for c in found[:AMBIGUOUS_SHOWN]], count)


def created_since(store: Store, since: Any, call: str = "list_runs") -> float | None:
    """``since`` as store-clock epoch seconds: None; a ``timedelta`` (that long ago by the store's
    clock); a ``datetime`` (one without a time zone is UTC, as Exchange prints times); or epoch
    seconds (a finite number). InvalidArgument otherwise."""
    if since is None:
        return None
    if isinstance(since, timedelta):
        if since < timedelta(0):
            raise InvalidArgument(f"{call}: since must not be a negative duration, got {since}")
        return store.clock.now() - since.total_seconds()
    if isinstance(since, datetime):
        return (since if since.tzinfo is not None else since.replace(tzinfo=UTC)).timestamp()
    if isinstance(since, (int, float)) and not isinstance(since, bool) and math.isfinite(since):
        return float(since)
    raise InvalidArgument(
        f"{call}: since must be a datetime, a timedelta or epoch seconds, got {shown(since)}"
    )


def run_filter(
    store: Store, *, status: Any, workflow: Any, state: Any, code_version: Any, since: Any, call: str = "list_runs"
) -> RunFilter:
    """The filters of ``list_runs`` checked (InvalidArgument naming ``call`` and the one that cannot be used;
    WorkflowError for a status outside the run statuses) and normalised: statuses and states are
    compared in upper case, as runs report them."""
    if status is not None:
        given = checked_text(call, "status", status, max_chars=NAME_MAX_CHARS)
        status = given.strip().upper()
        if status not in r.ALL_STATUSES:
            raise WorkflowError(f"unknown status {given!r} (known: {', '.join(r.ALL_STATUSES)})")
    if workflow is not None:
        workflow = checked_text(call, "workflow", workflow, max_chars=NAME_MAX_CHARS)
    if state is not None:
        state = checked_text(call, "state", state, max_chars=STATE_MAX_CHARS).strip().upper()
    if code_version is not None:
        code_version = checked_text(call, "code_version", code_version, max_chars=CODE_VERSION_MAX_CHARS)
    return RunFilter(status=status, workflow=workflow, state=state, code_version=code_version,
                     created_since=created_since(store, since, call))
