"""Roles, each with the rights of the ones before it (see :mod:`exchange._roles`, where the engine
reads them too: an operator prompt names the least role that may answer it)."""

from __future__ import annotations

from exchange._roles import ADMIN, ENGINEER, OPERATOR, ROLES, VIEWER, allows, checked_role

__all__ = ["ADMIN", "ENGINEER", "OPERATOR", "ROLES", "VIEWER", "allows", "checked_role"]
