"""What the hot path's statement builders share: the fence every execution's write names, the
column lists, and how a statement is spelled for the backend a builder is given.

The builders (:mod:`~exchange._store.sql.run_statements`, :mod:`~exchange._store.sql.step_statements`,
:mod:`~exchange._store.sql.event_statements`, :mod:`~exchange._store.sql.mail_statements`) each take
the store's :class:`~exchange._store.sql.backends.Backend` and say every difference between SQLite
and PostgreSQL themselves; their callers never ask which database the store lives in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from exchange._store.records import Fence
from exchange._store.sql.commits import Deferred
from exchange._store.sql.typed_sql import Cursor, Statement
from exchange._store.tables import runs
from exchange.errors import OwnershipLost

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend

STEP_COLUMNS = (
    "run_id", "seq", "name", "status", "attempts", "output", "error_type", "error_message", "error_blob",
    "skipped_ops", "next_attempt_at", "started_at", "finished_at", "side_effect",
)
# The columns a new run is inserted with (its lease's expiry apart: NULL, or set by the store's clock).
NEW_RUN_COLUMNS = (
    "id", "workflow", "status", "params", "queue", "partition_key", "priority", "dedup_id",
    "timeout_seconds", "code_version", "owner", "owner_node", "lease_generation", "cancel_requested",
    "created_by", "created_at", "updated_at", "executions", "parent_run_id",
)
EVENT_COLUMNS = ("run_id", "kind", "at", "actor", "reason", "step_seq", "payload")
FENCE_WHERE = "id = :fence_run AND owner = :fence_owner AND lease_generation = :fence_generation"


FENCE_REFUSED = "another gateway holds it now, or its lease was not renewed in time"


def fenced_refusal(fence: Fence, cur: Cursor) -> Deferred[None]:
    """What a unit whose last statement carried ``fence`` returns: OwnershipLost when that statement
    wrote nothing (the refusal leaves the batch whole; the unit's statements each carry the fence,
    so none of them wrote either)."""

    def held() -> None:
        if cur.rowcount == 0:
            raise OwnershipLost(fence.run_id, FENCE_REFUSED)

    return Deferred(held)


def fence_params(fence: Fence) -> dict[str, object]:
    """The parameters a fenced statement names its fence with."""
    return {"fence_run": fence.run_id, "fence_owner": fence.owner, "fence_generation": fence.generation}


def fence_exists(backend: Backend) -> str:
    """The condition a self-fenced write carries: the run's row still names the fence.

    Where rows lock, it keeps the run's row from changing owner until the write's commit (``FOR
    SHARE``); SQLite's single writer gives the same for free."""
    share = " FOR SHARE" if backend.row_locks else ""
    return f"EXISTS (SELECT 1 FROM {runs.name} WHERE {FENCE_WHERE}{share})"


def statement(backend: Backend, name: str, template: str, *, fenced: bool = False) -> Statement:
    """``template`` spelled for ``backend``'s driver (its parameter style)."""
    return Statement(name, template, backend.paramstyle, fenced=fenced)


def values_of(columns: Sequence[str]) -> str:
    """``:a, :b, ...``: the named parameters of ``columns``, in order."""
    return ", ".join(f":{c}" for c in columns)


def quoted(statuses: Sequence[str]) -> str:
    """``'A', 'B'``: statuses spelled as SQL literals (the store's own constants only)."""
    return ", ".join(f"'{status}'" for status in statuses)
