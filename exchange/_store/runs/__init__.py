"""Records of runs: the runs themselves, their steps, streams, messages and prompts, lookups, reruns, attention
and retention."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store.runs.attention import NOTIFIED_EVENT, REASONS, AttentionRow, AttentionTable
    from exchange._store.runs.audit_chain import AuditChains, ChainCheck
    from exchange._store.runs.lookup import RunFilter, RunLookup
    from exchange._store.runs.mail_feed import RUNS_CHANGED
    from exchange._store.runs.messages import VALUE_EVENT, EventLog, Mailbox, RunValues
    from exchange._store.runs.phase_notes import PhaseNoteRow, PhaseNotes, phase_note
    from exchange._store.runs.prompts import (
        ANSWERED,
        AWAITING_VERIFICATION,
        CLOSED,
        OPEN,
        TIMED_OUT,
        WAITING,
        Change,
        PromptRecord,
        PromptTable,
        answer_topic,
    )
    from exchange._store.runs.record_values import RecordValueTable, ValueSample
    from exchange._store.runs.rerun import Reruns
    from exchange._store.runs.retention import RetentionTable
    from exchange._store.runs.runs import Holder, NewRun, RunTable
    from exchange._store.runs.signatures import RELEASE_EVENT, SIGNATURE_EVENT, SignatureTable
    from exchange._store.runs.steps import StepTable, outcome_label
    from exchange._store.runs.streams import StreamTable
    from exchange._store.runs.units import GRANT_TOPIC, UnitHolder, UnitRequest, UnitTable

__all__ = [
    "AuditChains",
    "ChainCheck",
    "ANSWERED",
    "AWAITING_VERIFICATION",
    "AttentionRow",
    "AttentionTable",
    "CLOSED",
    "Change",
    "EventLog",
    "GRANT_TOPIC",
    "Holder",
    "Mailbox",
    "NOTIFIED_EVENT",
    "NewRun",
    "OPEN",
    "PhaseNoteRow",
    "PhaseNotes",
    "PromptRecord",
    "PromptTable",
    "REASONS",
    "RELEASE_EVENT",
    "RUNS_CHANGED",
    "RecordValueTable",
    "Reruns",
    "RetentionTable",
    "RunFilter",
    "RunLookup",
    "RunTable",
    "RunValues",
    "SIGNATURE_EVENT",
    "SignatureTable",
    "StepTable",
    "StreamTable",
    "TIMED_OUT",
    "UnitHolder",
    "UnitRequest",
    "UnitTable",
    "VALUE_EVENT",
    "ValueSample",
    "WAITING",
    "answer_topic",
    "outcome_label",
    "phase_note",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store.runs.attention": ("AttentionRow", "AttentionTable", "NOTIFIED_EVENT", "REASONS"),
        "exchange._store.runs.lookup": ("RunFilter", "RunLookup"),
        "exchange._store.runs.mail_feed": ("RUNS_CHANGED",),
        "exchange._store.runs.messages": ("EventLog", "Mailbox", "RunValues", "VALUE_EVENT"),
        "exchange._store.runs.phase_notes": ("PhaseNoteRow", "PhaseNotes", "phase_note"),
        "exchange._store.runs.prompts": (
            "ANSWERED", "AWAITING_VERIFICATION", "CLOSED", "Change", "OPEN", "PromptRecord", "PromptTable",
            "TIMED_OUT", "WAITING", "answer_topic",
        ),
        "exchange._store.runs.audit_chain": ("AuditChains", "ChainCheck"),
        "exchange._store.runs.record_values": ("RecordValueTable", "ValueSample"),
        "exchange._store.runs.rerun": ("Reruns",),
        "exchange._store.runs.retention": ("RetentionTable",),
        "exchange._store.runs.signatures": ("RELEASE_EVENT", "SIGNATURE_EVENT", "SignatureTable"),
        "exchange._store.runs.runs": ("Holder", "NewRun", "RunTable"),
        "exchange._store.runs.steps": ("StepTable", "outcome_label"),
        "exchange._store.runs.streams": ("StreamTable",),
        "exchange._store.runs.units": ("GRANT_TOPIC", "UnitHolder", "UnitRequest", "UnitTable"),
    }, globals())
