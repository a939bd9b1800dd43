"""The system store's tables (SQLAlchemy Core) and its versioned migrations.

Times are seconds since the epoch as floats (one representation on every backend); JSON values are
stored as text written by :mod:`exchange.workflows.store.codec`, so both backends hold the same bytes.

Migrations are numbered; ``schema_meta.version`` records the last applied one. Opening a store applies
the missing ones in one transaction each, so an upgraded install keeps its runs. A store whose version
is newer than this code is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

schema_meta = Table(
    "exchange_schema",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
)

runs = Table(
    "exchange_runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("state", String(32)),
    Column("params", Text, nullable=False),
    Column("result", Text),
    Column("error_type", String(200)),
    Column("error_message", Text),
    Column("queue", String(100), nullable=False),
    Column("partition_key", String(200)),
    Column("priority", Integer, nullable=False),
    Column("dedup_id", String(200)),
    Column("timeout_seconds", Float),
    Column("deadline_at", Float),
    Column("code_version", String(64), nullable=False),
    Column("progress", Text),
    Column("progress_extra", Text),
    Column("owner", String(200)),
    Column("lease_expires_at", Float),
    Column("cancel_requested", Integer, nullable=False),
    Column("cancel_reason", Text),
    Column("created_by", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("executions", Integer, nullable=False),
    # The tail of "quiet" operations (idle polls, finished sleeps) after the last recorded step:
    # how many there were and when the one in flight wakes. Updated in place, so idle loops do not
    # grow the store.
    Column("quiet_after_seq", Integer),
    Column("quiet_ops", Integer),
    Column("quiet_wake_at", Float),
    UniqueConstraint("dedup_id", name="uq_exchange_runs_dedup"),
)
Index("ix_exchange_runs_status", runs.c.status, runs.c.queue, runs.c.priority, runs.c.created_at)
Index("ix_exchange_runs_partition", runs.c.partition_key, runs.c.status)
Index("ix_exchange_runs_owner", runs.c.owner, runs.c.status)

steps = Table(
    "exchange_steps",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("status", String(16), nullable=False),  # SUCCESS | ERROR | RETRYING
    Column("attempts", Integer, nullable=False),
    Column("output", Text),
    Column("error_type", String(200)),
    Column("error_message", Text),
    Column("error_blob", LargeBinary),
    Column("skipped_ops", Integer, nullable=False),
    Column("next_attempt_at", Float),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float),
)

mailbox = Table(
    "exchange_mailbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(36), nullable=False),
    Column("topic", String(100), nullable=False),
    Column("payload", Text, nullable=False),
    Column("actor", String(200)),
    Column("reason", Text),
    Column("sent_at", Float, nullable=False),
    Column("consumed_seq", Integer),
    Column("consumed_at", Float),
)
Index("ix_exchange_mailbox_pending", mailbox.c.run_id, mailbox.c.topic, mailbox.c.consumed_at)

events = Table(
    "exchange_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(36), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("at", Float, nullable=False),
    Column("actor", String(200)),
    Column("reason", Text),
    Column("step_seq", Integer),
    Column("payload", Text),
)
Index("ix_exchange_events_run", events.c.run_id, events.c.kind, events.c.id)

run_values = Table(
    "exchange_run_values",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)


def _v1(conn: Connection) -> None:
    for table in (runs, steps, mailbox, events):
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def _v2(conn: Connection) -> None:
    """setEvent/getEvent values, added after the first schema."""
    run_values.create(conn, checkfirst=True)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2]
LATEST_VERSION = len(MIGRATIONS)


def current_version(conn: Connection) -> int:
    if not conn.dialect.has_table(conn, schema_meta.name):
        return 0
    row = conn.execute(text(f"SELECT version FROM {schema_meta.name} WHERE id = 1")).first()
    return int(row[0]) if row else 0
