"""Records kept for people: accounts, the audit log and run templates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store.admin.account_records import AccountTable, UserRow
    from exchange._store.admin.audit import AuditEntry, AuditLog
    from exchange._store.admin.templates import ACTIVATED, SAVED, TemplateRow, TemplateTable

__all__ = [
    "ACTIVATED",
    "AccountTable",
    "AuditEntry",
    "AuditLog",
    "SAVED",
    "TemplateRow",
    "TemplateTable",
    "UserRow",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store.admin.account_records": ("AccountTable", "UserRow"),
        "exchange._store.admin.audit": ("AuditEntry", "AuditLog"),
        "exchange._store.admin.templates": ("ACTIVATED", "SAVED", "TemplateRow", "TemplateTable"),
    }, globals())
