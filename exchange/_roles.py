"""Roles, each with the rights of the ones before it: viewer < operator < engineer < admin. A leaf
module: the accounts (``exchange._auth``) and the engine (who may answer an operator prompt) read it."""

from __future__ import annotations

from exchange.errors import AccessError

ROLES = ("viewer", "operator", "engineer", "admin")

VIEWER, OPERATOR, ENGINEER, ADMIN = ROLES


def checked_role(role: object) -> str:
    """``role`` (any case) as one of :data:`ROLES`; AccessError naming the known ones otherwise."""
    if isinstance(role, str) and role.strip().lower() in ROLES:
        return role.strip().lower()
    shown = repr(role) if isinstance(role, str) and len(role) <= 40 else type(role).__name__
    raise AccessError(f"unknown role {shown}; roles: {', '.join(ROLES)}")


def allows(role: str, needed: str) -> bool:
    """Whether ``role`` has the rights of ``needed`` (an unknown role has none)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)
