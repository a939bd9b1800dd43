""""""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store import codec, records
    from exchange._store.admin import ACTIVATED, SAVED, AccountTable, AuditEntry, AuditLog, TemplateRow, UserRow
    from exchange._store.gateways import (
        MAINTENANCE,
        RETENTION,
        FileChanges,
        NodeLock,
        NodeTable,
        is_draining,
        sqlite_file_changes,
    )
    from exchange._store.records import (
        ACTIVE_STATUSES,
        ALL_STATUSES,
        FINAL_STATUSES,
        HELD_STEP_STATUSES,
        MESSAGE_CONSUMED,
        MESSAGE_DROPPED,
        STEP_ERROR,
        STEP_HELD,
        STEP_HELD_IN_DOUBT,
        STEP_RETRYING,
        STEP_STARTED,
        STEP_SUCCESS,
        EventRecord,
        Fence,
        MessageFate,
        MessageRecord,
        NewEvent,
        RunRecord,
        StepRecord,
    )
    from exchange._store.runs import (
        ANSWERED,
        AWAITING_VERIFICATION,
        CLOSED,
        NOTIFIED_EVENT,
        OPEN,
        REASONS,
        RUNS_CHANGED,
        TIMED_OUT,
        VALUE_EVENT,
        WAITING,
        AttentionRow,
        AttentionTable,
        Change,
        Holder,
        NewRun,
        PhaseNoteRow,
        PromptRecord,
        RetentionTable,
        RunFilter,
        answer_topic,
        phase_note,
    )
    from exchange._store.store import Store

__all__ = [
    "ACTIVATED",
    "ACTIVE_STATUSES",
    "ALL_STATUSES",
    "ANSWERED",
    "AWAITING_VERIFICATION",
    "AccountTable",
    "AttentionRow",
    "AttentionTable",
    "AuditEntry",
    "AuditLog",
    "CLOSED",
    "Change",
    "EventRecord",
    "FINAL_STATUSES",
    "Fence",
    "FileChanges",
    "HELD_STEP_STATUSES",
    "Holder",
    "MAINTENANCE",
    "MESSAGE_CONSUMED",
    "MESSAGE_DROPPED",
    "MessageFate",
    "MessageRecord",
    "NOTIFIED_EVENT",
    "NewEvent",
    "NewRun",
    "NodeLock",
    "NodeTable",
    "OPEN",
    "PhaseNoteRow",
    "PromptRecord",
    "REASONS",
    "RETENTION",
    "RUNS_CHANGED",
    "RetentionTable",
    "RunFilter",
    "RunRecord",
    "SAVED",
    "STEP_ERROR",
    "STEP_HELD",
    "STEP_HELD_IN_DOUBT",
    "STEP_RETRYING",
    "STEP_STARTED",
    "STEP_SUCCESS",
    "StepRecord",
    "Store",
    "TIMED_OUT",
    "TemplateRow",
    "UserRow",
    "VALUE_EVENT",
    "WAITING",
    "answer_topic",
    "codec",
    "is_draining",
    "phase_note",
    "records",
    "sqlite_file_changes",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store": ("codec", "records"),
        "exchange._store.admin": (
            "ACTIVATED", "AccountTable", "AuditEntry", "AuditLog", "SAVED", "TemplateRow", "UserRow",
        ),
        "exchange._store.gateways": (
            "FileChanges", "MAINTENANCE", "NodeLock", "NodeTable", "RETENTION", "is_draining", "sqlite_file_changes",
        ),
        "exchange._store.records": (
            "ACTIVE_STATUSES", "ALL_STATUSES", "EventRecord", "FINAL_STATUSES", "Fence", "HELD_STEP_STATUSES",
            "MESSAGE_CONSUMED", "MESSAGE_DROPPED", "MessageFate", "MessageRecord", "NewEvent", "RunRecord",
            "STEP_ERROR", "STEP_HELD", "STEP_HELD_IN_DOUBT", "STEP_RETRYING", "STEP_STARTED", "STEP_SUCCESS",
            "StepRecord",
        ),
        "exchange._store.runs": (
            "ANSWERED", "AWAITING_VERIFICATION", "AttentionRow", "AttentionTable", "CLOSED", "Change", "Holder",
            "NOTIFIED_EVENT", "NewRun", "OPEN", "PhaseNoteRow", "PromptRecord", "REASONS", "RUNS_CHANGED",
            "RetentionTable", "RunFilter", "TIMED_OUT", "VALUE_EVENT", "WAITING", "answer_topic", "phase_note",
        ),
        "exchange._store.store": ("Store",),
    }, globals())
