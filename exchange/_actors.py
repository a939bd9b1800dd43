"""Who acts: the names the audit trail records, and when two of them are one person. A leaf module:
the engine (who answered a prompt, who verifies it), the CLI and the accounts read it.

An actor is an Exchange user's name (``anna``: signed in, or named with ``--user`` and a password),
an API token (``token:NAME``: a program, never a person), an OPC UA user (``opcua:NAME``), or, for a
command-line call that names no user, the operating-system account the process runs as,
``account@host``. That account is taken from the process's uid, never from ``$LOGNAME``,
``$USER`` or ``$USERNAME``: anyone can set those (``LOGNAME=eve exchange ...``), the uid only the
operating system."""

from __future__ import annotations

import functools
import os
import platform
import sys

TOKEN_PREFIX = "token:"


def os_account() -> str:
    """The name of the operating-system account this process runs as, from its uid (Windows: the
    process token's user, by ``GetUserNameW``); ``uid<N>`` when the account database has no entry
    for the uid (a container's arbitrary uid). Never read from the environment."""
    if sys.platform == "win32":  # no pwd module; os.getlogin() asks Windows, not the environment
        try:
            return os.getlogin()
        except OSError:
            return "unknown"
    else:
        import pwd

        uid = os.getuid()
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid{uid}"


@functools.cache
def local_actor() -> str:
    """``account@host``: the actor of a local call that names nobody (looked up once: the account
    database is read on every lookup, a tenth of a run start's CPU)."""
    return f"{os_account()}@{platform.node() or 'localhost'}"  # platform.node(): Windows has no os.uname


def is_token(actor: str) -> bool:
    """Whether ``actor`` is an API token's (``token:NAME``): a program, not a person."""
    return actor.startswith(TOKEN_PREFIX)


def _person_keys(actor: str) -> set[str]:
    name = actor.strip().casefold()  # Exchange user names are unique whatever their case
    local, at, _host = name.partition("@")
    return {name, local} if at and local else {name}


def same_person(a: str, b: str) -> bool:
    """Whether actors ``a`` and ``b`` may be one person, erring towards yes: the same name in any
    case, or the same name before an ``@`` (the operating-system account ``olga@vm`` is taken to be
    the Exchange user ``olga``, and ``j.smith@site1`` the same person as ``j.smith@site2``)."""
    return bool(_person_keys(a) & _person_keys(b))
