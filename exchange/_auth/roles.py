"""Rights and roles (see :mod:`exchange._roles`, where the engine reads them too: an operator prompt
names the least built-in role that may answer it)."""

from __future__ import annotations

from exchange._roles import (
    ADMIN,
    ADMIN_RIGHT,
    ANSWER,
    BUILT_IN,
    BUILT_IN_ROLES,
    CANCEL,
    COMMAND,
    EDIT_TEMPLATES,
    ENGINEER,
    OPERATOR,
    READ,
    RELEASE,
    RERUN,
    RIGHTS,
    ROLES,
    SIGN,
    START,
    START_FREE,
    VERIFY,
    VIEWER,
    Roles,
)

__all__ = ["ADMIN", "ADMIN_RIGHT", "ANSWER", "BUILT_IN", "BUILT_IN_ROLES", "CANCEL", "COMMAND", "EDIT_TEMPLATES",
           "ENGINEER", "OPERATOR", "READ", "RELEASE", "RERUN", "RIGHTS", "ROLES", "SIGN", "START", "START_FREE",
           "VERIFY", "VIEWER", "Roles"]
