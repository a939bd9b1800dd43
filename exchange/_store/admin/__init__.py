"""Records kept for people: accounts, the audit log and run templates."""

from __future__ import annotations

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
