"""Rights and roles: the one table of what each right allows, and the roles that hold them.

Every check (the HTTP API, the console, the OPC UA server, the engine's prompt checks, the CLI's
``--user``) asks for a right, never for a role. The four built-in roles are ranked, each with the
rights of the ones before it: viewer < operator < engineer < admin. A plant adds roles of its own
with ``[roles.NAME] rights = [...]`` (parsed by :mod:`exchange._config_roles`); the built-in roles'
rights are fixed.

An operator prompt names the least built-in role that may answer it (``role``) and verify it
(``verify_role``): a floor on the rank of a built-in role, on top of the ``answer``/``verify``
right. A custom role has no rank: with the right, it clears the ``operator`` and ``engineer`` floors;
the ``admin`` floor only with the ``admin`` right too (:meth:`Roles.may`).

A leaf module: the accounts (``exchange._auth``), the config and the engine read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exchange.errors import AccessError

ROLES = ("viewer", "operator", "engineer", "admin")

VIEWER, OPERATOR, ENGINEER, ADMIN = ROLES

# The rights, in the order the docs list them, with what each allows (docs/configuration.md, [roles]).
RIGHTS: Mapping[str, str] = {
    "read": "see workflows, runs (steps, audit trail, live stream), prompts, queues, units, phases, "
            "templates and maintenance status",
    "start": "start a run from a parameter template's active version (setting only its partition key "
             "and deduplication id)",
    "start_free": "start any workflow with parameters of one's own, and set any start option (queue, "
                  "priority, timeout) on any start",
    "command": "send HOLD, RESUME, STOP, ABORT, RESET and the other commands to a run (HTTP API, console, "
               "OPC UA Command variables)",
    "answer": "answer an operator prompt (the prompt's role is a floor for built-in roles)",
    "verify": "verify, or send back, another person's answer to a prompt (its verify_role likewise)",
    "cancel": "cancel a run",
    "rerun": "retry or fork a finished run",
    "edit_templates": "save parameter templates (recipes) and choose their active version",
    "sign": "sign a run's record with a meaning of one's own",
    "release": "release a batch: a signature meaning \"released\"",
    "admin": "users, tokens, maintenance mode, retention, the console's admin page",
}
READ, START, START_FREE, COMMAND, ANSWER, VERIFY, CANCEL, RERUN, EDIT_TEMPLATES, SIGN, RELEASE, ADMIN_RIGHT = RIGHTS

# What each built-in role may do: exactly what the ranked roles allowed before rights existed.
_OPERATOR_RIGHTS = frozenset({READ, START, COMMAND, ANSWER, VERIFY})
BUILT_IN: Mapping[str, frozenset[str]] = {
    VIEWER: frozenset({READ}),
    OPERATOR: _OPERATOR_RIGHTS,
    ENGINEER: _OPERATOR_RIGHTS | {START_FREE, CANCEL, RERUN, EDIT_TEMPLATES, SIGN},
    ADMIN: frozenset(RIGHTS),
}

ROLE_NAME_MAX_CHARS = 16  # the store's column


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 40 else type(value).__name__


@dataclass(frozen=True)
class Roles:
    """The built-in roles and a plant's own (``custom``: name -> rights, already checked)."""

    custom: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def names(self) -> tuple[str, ...]:
        """Every role: the built-in ones by rank, then the plant's by name."""
        return ROLES + tuple(sorted(self.custom))

    def rights_of(self, role: str) -> frozenset[str]:
        """The rights of ``role``; none for a role that is not (or no longer) configured."""
        return BUILT_IN.get(role) or self.custom.get(role) or frozenset()

    def checked(self, role: object) -> str:
        """``role`` (any case) as one of :meth:`names`; AccessError naming the known ones otherwise."""
        if isinstance(role, str) and role.strip().lower() in self.names():
            return role.strip().lower()
        raise AccessError(f"unknown role {_shown(role)}; roles: {', '.join(self.names())}"
                          " (a role of your own: [roles.NAME] rights = [...] in the config)")

    def holders(self, right: str) -> list[str]:
        """The roles that hold ``right``, in :meth:`names` order."""
        return [name for name in self.names() if right in self.rights_of(name)]

    def may(self, role: str | None, right: str, floor: str | None = None) -> bool:
        """Whether ``role`` holds ``right`` and clears ``floor`` (a prompt's ``role`` or
        ``verify_role``, a built-in role): a built-in role ranks at or above it; a custom role
        clears any floor but ``admin``, which needs the ``admin`` right too. ``role`` None: the
        trusted local caller (the CLI without ``--user``), who may."""
        if role is None:
            return True
        rights = self.rights_of(role)
        if right not in rights:
            return False
        if floor is None:
            return True
        if floor not in ROLES:
            return False
        if role in BUILT_IN:
            return ROLES.index(role) >= ROLES.index(floor)
        return floor != ADMIN or ADMIN_RIGHT in rights

    def refusal(self, role: str, right: str, who: str, what: str) -> str:
        """The one line that says why ``who`` (with ``role``) may not do ``what``, needing ``right``."""
        unknown = "" if role in self.names() else f" (role {role!r} is not configured: it gives no rights)"
        return (f"{who} has role {role}{unknown}; {what} needs the right {right!r} "
                f"(roles with it: {', '.join(self.holders(right))})")


BUILT_IN_ROLES = Roles()

