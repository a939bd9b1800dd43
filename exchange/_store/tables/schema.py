"""The system store's tables (SQLAlchemy Core) and its versioned migrations.

Times are seconds since the epoch as floats (one representation on every backend); JSON values are
stored as text written by :mod:`exchange._store.codec`, so both backends hold the same bytes.

Migrations are numbered; ``schema_meta.version`` records the last applied one. Opening a store applies
the missing ones in one transaction each, so an upgraded install keeps its runs. A store whose version
is newer than this code is refused rather than guessed at. A new store is created from the current
table definitions by the first migration, so later migrations add only what is missing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
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
    and_,
    case,
    func,
    inspect,
    select,
    text,
    update,
)

log = logging.getLogger(__name__)

metadata = MetaData()

# The statuses of a run that a gateway holds (records.ACTIVE_STATUSES, spelled here for the index).
_ACTIVE = ("PENDING", "RUNNING")

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
    Column("owner", String(200)),  # the execution owner: a gateway process, "<node id>/<pid>-<tag>"
    Column("owner_node", String(200)),  # the node id of that gateway (a restarted node takes back its runs)
    Column("lease_generation", Integer, nullable=False, server_default=text("0")),  # the fence: +1 per claim
    Column("lease_expires_at", Float),  # store clock
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
    Column("parent_run_id", String(36)),  # the run that started this one with rt.startChild
    Column("forked_from", String(36)),  # the run this one is a fork of (exchange fork): its steps are copies
    # The head of the run's audit chain (exchange._store.sql.chain): how many links it has, the
    # hash of the newest and of the one before it. NULL: nothing of the run was chained.
    Column("audit_seq", Integer),
    Column("audit_head", String(64)),
    Column("audit_prev", String(64)),
    UniqueConstraint("dedup_id", name="uq_exchange_runs_dedup"),
)
Index("ix_exchange_runs_status", runs.c.status, runs.c.queue, runs.c.priority, runs.c.created_at)
Index("ix_exchange_runs_partition", runs.c.partition_key, runs.c.status)
Index("ix_exchange_runs_owner", runs.c.owner, runs.c.status)
OWNER_NODE_INDEX = Index("ix_exchange_runs_owner_node", runs.c.owner_node, runs.c.status)
FINISHED_INDEX = Index("ix_exchange_runs_finished", runs.c.status, runs.c.finished_at)  # retention
PARENT_INDEX = Index("ix_exchange_runs_parent", runs.c.parent_run_id, runs.c.status)  # a parent's children
# At most one active run per partition key, across every gateway: the database enforces it.
_active_partition = and_(runs.c.status.in_(_ACTIVE), runs.c.partition_key.is_not(None))


_partition_index: list[Index] = []
_partition_index_lock = threading.Lock()


def active_partition_index() -> Index:
    """The partial unique index behind :data:`_active_partition`, made (and added to ``runs.indexes``)
    once, when a migration creates it: its ``sqlite_where`` and ``postgresql_where`` make SQLAlchemy
    import both dialects, so made at import it cost every process the other backend's dialect (the
    PostgreSQL one is some 40 ms of a gateway's start on SQLite); a store that needs no migration
    now imports its own dialect only."""
    with _partition_index_lock:  # two stores migrating at once in one process: still one index
        if not _partition_index:
            _partition_index.append(Index(
                "uq_exchange_runs_active_partition",
                runs.c.partition_key,
                unique=True,
                sqlite_where=_active_partition,
                postgresql_where=_active_partition,
            ))
        return _partition_index[0]


steps = Table(
    "exchange_steps",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("status", String(16), nullable=False),  # SUCCESS | ERROR | RETRYING | STARTED | HELD[_IN_DOUBT]
    Column("attempts", Integer, nullable=False),
    Column("output", Text),
    Column("error_type", String(200)),
    Column("error_message", Text),
    Column("error_blob", LargeBinary),
    Column("skipped_ops", Integer, nullable=False),
    Column("next_attempt_at", Float),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float),
    # On an ERROR row: 1 when its last attempt had begun its side effect (its STARTED mark was
    # written) before failing, so a retry of the run treats that side effect as in doubt.
    Column("side_effect", Integer),
    # The row's latest link of the run's audit chain (exchange._store.sql.chain): its place, the
    # head before it, its hash, and the places the row's earlier writes took ("3,7").
    Column("chain_seq", Integer),
    Column("chain_prev", String(64)),
    Column("chain_hash", String(64)),
    Column("chain_replaced", Text),
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
    # What became of a consumed message: CONSUMED (the workflow got it) or DROPPED (a receive took it
    # and discarded it: a command its state does not accept, superseded, unknown), and in words why.
    # NULL on messages consumed before migration 4 (their command/command_dropped events tell).
    Column("outcome", String(16)),
    Column("outcome_note", Text),
)
Index("ix_exchange_mailbox_pending", mailbox.c.run_id, mailbox.c.topic, mailbox.c.consumed_at)
MAILBOX_CONSUMED_INDEX = Index("ix_exchange_mailbox_consumed", mailbox.c.consumed_at)  # /metrics: latest deliveries

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
    # The event's link of the run's audit chain (exchange._store.sql.chain): place, head before, hash.
    Column("chain_seq", Integer),
    Column("chain_prev", String(64)),
    Column("chain_hash", String(64)),
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

# One row per gateway process (owner) that holds runs: renewing it renews the leases of every run the
# owner holds, one row written however many runs wait (a run's own lease_expires_at is the grant of
# the claim, recovery or start that gave it to the owner). A run's lease has run out when both have.
owners = Table(
    "exchange_owners",
    metadata,
    Column("owner", String(200), primary_key=True),
    Column("lease_expires_at", Float, nullable=False),  # store clock
)


def run_columns() -> list[ColumnElement[Any]]:
    """The run table's columns as reads show them: ``lease_expires_at`` of an active run is its
    lease as it stands, its own grant or its owner's last renewal, whichever runs out later."""
    later_renewal = (
        select(owners.c.lease_expires_at)
        .where(owners.c.owner == runs.c.owner,
               owners.c.lease_expires_at > func.coalesce(runs.c.lease_expires_at, 0.0))
        .scalar_subquery()
    )
    lease = case((runs.c.status.in_(_ACTIVE), func.coalesce(later_renewal, runs.c.lease_expires_at)),
                 else_=runs.c.lease_expires_at)
    return [lease.label(c.name) if c.name == "lease_expires_at" else c for c in runs.c]


nodes = Table(
    "exchange_nodes",
    metadata,
    Column("node_id", String(200), primary_key=True),
    Column("owner", String(200), nullable=False),  # the gateway process holding the node lock
    Column("lock_checked_at", Float, nullable=False),  # store clock: when it last saw its lock held
    Column("started_at", Float, nullable=False),
    # The queues its gateway serves, a JSON list (NULL: every queue): the gateways that count as
    # each other's peers when they share the work (exchange._engine.gateway.fair_share).
    Column("queues", Text, nullable=True),
)

# People and programs who use the HTTP API and the console (exchange._auth). Secrets are stored
# hashed only: passwords with argon2id, tokens and session ids (random, 256 bits) with SHA-256.
users = Table(
    "exchange_users",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("role", String(16), nullable=False),  # viewer | operator | engineer | admin
    Column("password_hash", Text, nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("full_name", String(200)),  # the printed name an electronic signature shows (None: the name)
)

api_tokens = Table(
    "exchange_tokens",
    metadata,
    Column("id", String(32), primary_key=True),  # the token's public part: it names the row
    Column("name", String(100), nullable=False),
    Column("role", String(16), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)

# Failed sign-ins of the command line (exchange._auth.throttle.StoredThrottle): each ``exchange``
# process is new, so its count of a user's failures lives here, where the next one finds it.
sign_in_failures = Table(
    "exchange_sign_in_failures",
    metadata,
    Column("user_key", String(100), primary_key=True),  # the name as typed, casefolded
    Column("client", String(100), primary_key=True),  # where from: "the command line"
    Column("failures", Integer, nullable=False),
    Column("last_failure_at", Float, nullable=False),  # store clock
    Column("wait_seconds", Float, nullable=False),  # before the next attempt is checked, from last_failure_at
)

sessions = Table(
    "exchange_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("user_name", String(100), nullable=False),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
Index("ix_exchange_sessions_user", sessions.c.user_name)

# What people do outside any run, one row per action (``exchange tags write``: a tag written by hand).
# Written before the action is carried out and completed after it: a row left PENDING belongs to an
# action whose process ended half-way (it may or may not have happened).
audit_log = Table(
    "exchange_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),  # store clock: when it was recorded, before the action
    Column("actor", String(200), nullable=False),
    Column("action", String(32), nullable=False),  # tag_write
    Column("target", Text, nullable=False),  # what it acted on: the tag path
    Column("reason", Text),
    Column("details", Text),  # JSON: the action's facts (device, address, old and new value, ...)
    Column("outcome", String(16), nullable=False),  # PENDING, then the action's outcome (WRITTEN, ...)
    Column("outcome_note", Text),
    Column("finished_at", Float),
)
Index("ix_exchange_audit_target", audit_log.c.action, audit_log.c.target, audit_log.c.id)

# Parameter templates (recipes): named, versioned; one active version per name, the older ones kept.
param_templates = Table(
    "exchange_templates",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("params", Text, nullable=False),
    Column("active", Integer, nullable=False),  # 1 on the one version operators start from
    Column("note", Text),
    Column("created_by", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
)

# Gateway-wide settings every gateway obeys, one row per key (``maintenance``: drain or normal;
# ``retention``: when it was last applied, the lease that lets one gateway apply it).
control = Table(
    "exchange_control",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),  # JSON
    Column("set_by", String(200), nullable=False),
    Column("set_at", Float, nullable=False),
)

# rt.writeStream: append-only, ordered values per run and key (readStream reads them).
streams = Table(
    "exchange_streams",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the writing step's sequence number: ordered, written once
    Column("value", Text, nullable=False),  # JSON
    Column("at", Float, nullable=False),
)

# [record] tags: the process values sampled while a run ran, kept with the run (exchange._store.runs.
# record_values). A row is a value kept (on change, or unchanged for keep_alive_ms), or a gap
# (value NULL: the read failed, ``quality`` says how); ``interval_ms`` is the sampler's then.
record_values = Table(
    "exchange_record_values",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(36), nullable=False),
    Column("tag", Text, nullable=False),
    Column("at", Float, nullable=False),  # store clock, when the value was read
    Column("value", Text),  # JSON; NULL for a gap
    Column("quality", String(200)),  # NULL when Good
    Column("interval_ms", Integer, nullable=False),
)
RECORD_VALUES_INDEX = Index("ix_exchange_record_values_run", record_values.c.run_id, record_values.c.tag,
                            record_values.c.at)

# What the gateways' schedules, triggers and command tags have done, shared by every gateway:
# a schedule's last tick handled and paused flag, a trigger's last value seen and its edge count.
plant_state = Table(
    "exchange_plant_state",
    metadata,
    Column("kind", String(16), primary_key=True),  # schedule | trigger | command_tag
    Column("name", String(200), primary_key=True),
    Column("last_value", Text),  # JSON: a trigger's last reading
    Column("edges", Integer, nullable=False),  # edges acted on (a trigger's runs are named by it)
    Column("last_tick", Float),  # a schedule's last tick handled (epoch seconds)
    Column("paused", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# Operator prompts (operator.prompt): the form a run waits on, who answered and who verified. The
# answer reaches the run as a mailbox message; the row is what people see and act on.
prompts = Table(
    "exchange_prompts",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("seq", Integer, nullable=False),  # the sequence number of the prompt call in its run
    Column("text", Text, nullable=False),
    Column("fields", Text, nullable=False),  # JSON: field name -> field
    Column("role", String(16), nullable=False),  # the least role that may answer
    Column("verify_role", String(16)),  # None: no verification
    Column("status", String(24), nullable=False),  # OPEN | AWAITING_VERIFICATION | ANSWERED | TIMED_OUT | CLOSED
    Column("opened_at", Float, nullable=False),
    Column("deadline_at", Float),  # store clock; None: no timeout
    Column("answer", Text),  # JSON: the values given (waiting for verification, or final)
    Column("answered_by", String(200)),
    Column("answered_at", Float),
    Column("answer_reason", Text),
    Column("verified_by", String(200)),
    Column("verified_at", Float),
    Column("verify_reason", Text),
    Column("closed_why", Text),
    Index("ix_exchange_prompts_status", "status"),
)

# Units (a vessel, a line) that one run at a time may hold: a row per unit held, its primary key the
# database's own guarantee that a unit has at most one holder, across gateways.
unit_holders = Table(
    "exchange_unit_holders",
    metadata,
    Column("unit", String(200), primary_key=True),
    Column("run_id", String(36), nullable=False),
    Column("request_id", Integer, nullable=False),
    Column("since", Float, nullable=False),  # store clock
    Index("ix_exchange_unit_holders_run", "run_id"),
)
# What runs asked for: all of ``wanted`` (a name, or several taken all or none), or any one of them
# (a class); granted in order of priority, then request time.
unit_requests = Table(
    "exchange_unit_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(36), nullable=False),
    Column("seq", Integer, nullable=False),  # the sequence number of the acquire in its run
    Column("wanted", Text, nullable=False),  # JSON: the unit names, in the order asked
    Column("any_of", Integer, nullable=False),  # 1: any one of them (a class); 0: all of them
    Column("unit_class", String(200)),  # the class asked for, when any_of
    Column("priority", Integer, nullable=False),
    Column("requested_at", Float, nullable=False),  # store clock
    Column("status", String(16), nullable=False),  # WAITING | HELD | GRANTED | RELEASED | CANCELLED
    Column("granted", Text),  # JSON: the units granted
    Column("granted_at", Float),
    Column("ended_at", Float),
    Column("ended_why", Text),
    UniqueConstraint("run_id", "seq", name="uq_exchange_unit_requests_run_seq"),
    Index("ix_exchange_unit_requests_status", "status"),
)


def _v1(conn: Connection) -> None:
    active_partition_index()  # one of runs.indexes from now on
    for table in (runs, steps, mailbox, events):
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def _v2(conn: Connection) -> None:
    """setEvent/getEvent values, added after the first schema."""
    run_values.create(conn, checkfirst=True)


def _add_column_if_missing(conn: Connection, table: Table, ddl: str) -> None:
    name = ddl.split()[0]
    if name not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
        conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))


def _v3(conn: Connection) -> None:
    """Fencing and one active run per partition key.

    Runs get the node that holds them and a lease generation; owned runs of the old schema (whose
    owner was the node id) keep their node. Before the partition index can exist, runs that share an
    active partition key (the old claim could let two through) are put back in the queue, all but the
    one that started first: they resume by replay when the key is free.
    """
    _add_column_if_missing(conn, runs, "owner_node VARCHAR(200)")
    _add_column_if_missing(conn, runs, "lease_generation INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        update(runs)
        .where(runs.c.owner.is_not(None), runs.c.owner_node.is_(None), runs.c.status.in_(_ACTIVE))
        .values(owner_node=runs.c.owner, lease_generation=1)
    )
    active = conn.execute(
        select(runs.c.id, runs.c.partition_key)
        .where(_active_partition)
        .order_by(runs.c.partition_key, runs.c.started_at.is_(None), runs.c.started_at, runs.c.created_at)
    ).all()
    seen: set[str] = set()
    for run_id, key in active:
        if key in seen:
            log.warning("run %s shares active partition key %r with an earlier run: back to the queue", run_id, key)
            conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(status="ENQUEUED", owner=None, owner_node=None, lease_expires_at=None)
            )
        seen.add(key)
    active_partition_index().create(conn, checkfirst=True)
    OWNER_NODE_INDEX.create(conn, checkfirst=True)
    nodes.create(conn, checkfirst=True)


def _v4(conn: Connection) -> None:
    """Each consumed message says whether the workflow got it or dropped it (and why), so a sender
    can learn what became of its command (``exchange send --wait``)."""
    _add_column_if_missing(conn, mailbox, "outcome VARCHAR(16)")
    _add_column_if_missing(conn, mailbox, "outcome_note TEXT")


def _v5(conn: Connection) -> None:
    """Users, API tokens and console sessions (the HTTP API and the console); the mailbox's index on
    delivery time (command latency in /metrics)."""
    MAILBOX_CONSUMED_INDEX.create(conn, checkfirst=True)
    for table in (users, api_tokens, sessions):
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def _v6(conn: Connection) -> None:
    """The audit log of what people do outside runs (tags written by hand)."""
    audit_log.create(conn, checkfirst=True)
    for index in audit_log.indexes:
        index.create(conn, checkfirst=True)


def _v7(conn: Connection) -> None:
    """Parameter templates (the console's start page)."""
    param_templates.create(conn, checkfirst=True)


def _v8(conn: Connection) -> None:
    """Gateway-wide settings: maintenance mode, the retention lease; finished runs by age (retention)."""
    control.create(conn, checkfirst=True)
    FINISHED_INDEX.create(conn, checkfirst=True)


def _v9(conn: Connection) -> None:
    """Child workflows (a run's parent) and the runs' streams."""
    _add_column_if_missing(conn, runs, "parent_run_id VARCHAR(36)")
    PARENT_INDEX.create(conn, checkfirst=True)
    streams.create(conn, checkfirst=True)


def _v10(conn: Connection) -> None:
    """Schedules', triggers' and command tags' shared state."""
    plant_state.create(conn, checkfirst=True)


def _v11(conn: Connection) -> None:
    """Leases renewed per owner (one row a gateway) instead of per run."""
    owners.create(conn, checkfirst=True)


def _v12(conn: Connection) -> None:
    """Operator prompts."""
    prompts.create(conn, checkfirst=True)
    for index in prompts.indexes:
        index.create(conn, checkfirst=True)


def _v13(conn: Connection) -> None:
    """Retry and fork of a run: a fork's origin, and whether a failed step had begun its side effect."""
    _add_column_if_missing(conn, runs, "forked_from VARCHAR(36)")
    _add_column_if_missing(conn, steps, "side_effect INTEGER")


def _v14(conn: Connection) -> None:
    """The queues each node's gateway serves (gateways of other queues are not its peers)."""
    _add_column_if_missing(conn, nodes, "queues TEXT")


def _v15(conn: Connection) -> None:
    """Units: who holds each one, and the runs' requests for them."""
    for table in (unit_holders, unit_requests):
        table.create(conn, checkfirst=True)
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def _v16(conn: Connection) -> None:
    """The audit chain: each event's and step row's link, and the head on the run's row. Runs
    written before have none (their check says ``unchained``)."""
    for table, ddl in ((runs, "audit_seq INTEGER"), (runs, "audit_head VARCHAR(64)"),
                       (runs, "audit_prev VARCHAR(64)"), (steps, "chain_replaced TEXT")):
        _add_column_if_missing(conn, table, ddl)
    for table in (events, steps):
        for ddl in ("chain_seq INTEGER", "chain_prev VARCHAR(64)", "chain_hash VARCHAR(64)"):
            _add_column_if_missing(conn, table, ddl)


def _v17(conn: Connection) -> None:
    """Electronic signatures: a user's printed (full) name."""
    _add_column_if_missing(conn, users, "full_name VARCHAR(200)")


def _v18(conn: Connection) -> None:
    """The process values of the batch record ([record] tags sampled while a run ran)."""
    record_values.create(conn, checkfirst=True)
    RECORD_VALUES_INDEX.create(conn, checkfirst=True)


def _v19(conn: Connection) -> None:
    """The command line's failed sign-ins, counted across its processes."""
    sign_in_failures.create(conn, checkfirst=True)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10, _v11, _v12,
                                                   _v13, _v14, _v15, _v16, _v17, _v18, _v19]
LATEST_VERSION = len(MIGRATIONS)


# Tables and views of a SQLite file, read through sqlite3 (SQLite's own tables left out).
SQLITE_TABLE_NAMES = (
    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite~_%' ESCAPE '~'"
)


def foreign_names(names: list[str]) -> list[str]:
    """The names among ``names`` (of the store's own schema) that are not Exchange's tables, sorted."""
    return sorted(name for name in names if name not in metadata.tables)


def foreign_tables(conn: Connection) -> list[str]:
    """Tables and views in the store's database that are not Exchange's, sorted: those of the
    default schema that are not Exchange's tables, and every one of another schema (as
    ``schema.name``; PostgreSQL's own catalogs left out)."""
    inspector = inspect(conn)
    default = inspector.default_schema_name
    found: list[str] = []
    for schema_name in inspector.get_schema_names():
        if schema_name == "information_schema":
            continue
        names = [*inspector.get_table_names(schema=schema_name), *inspector.get_view_names(schema=schema_name)]
        if schema_name == default:
            found.extend(foreign_names(names))
        else:
            found.extend(f"{schema_name}.{name}" for name in names)
    return sorted(found)


def current_version(conn: Connection) -> int:
    if not conn.dialect.has_table(conn, schema_meta.name):
        return 0
    row = conn.execute(select(schema_meta.c.version).where(schema_meta.c.id == 1)).first()
    return int(row[0]) if row else 0
