"""Users, tokens and sessions: the one service the CLI and the HTTP API both use."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from exchange._auth import secrets
from exchange._auth.policy import (
    NAME_PATTERN,
    PASSWORD_MAX_CHARS,
    PASSWORD_MIN_CHARS,
    checked_full_name,
    checked_name,
    checked_password,
    checked_token_name,
    encodable,
)
from exchange._auth.roles import BUILT_IN_ROLES, RIGHTS, Roles
from exchange._auth.throttle import SHARED, SignInThrottle, StoredThrottle
from exchange._store import AccountTable, UserRow
from exchange._timefmt import iso_utc as iso
from exchange.errors import AccessError, SignInRefused, UnknownUser

log = logging.getLogger(__name__)

__all__ = ["NAME_PATTERN", "PASSWORD_MAX_CHARS", "PASSWORD_MIN_CHARS", "Accounts", "Identity", "checked_name",
           "checked_password"]

TOKEN_MAX_CHARS = 200
WRONG_CREDENTIALS = "wrong user name or password"


@dataclass(frozen=True)
class Identity:
    """Who is calling: a user (signed in, or by password) or an API token, with the rights of its
    role as the gateway's config has them (``roles``)."""

    name: str
    role: str
    kind: str  # "user" | "token"
    csrf_token: str | None = None  # console sessions only: unsafe requests must echo it
    roles: Roles = field(default=BUILT_IN_ROLES, repr=False, compare=False)
    full_name: str | None = field(default=None, compare=False)  # a user's printed name, if given

    @property
    def rights(self) -> frozenset[str]:
        return self.roles.rights_of(self.role)

    def may(self, right: str) -> bool:
        return right in self.rights

    def refusal(self, right: str, what: str) -> str:
        """Why this caller may not do ``what`` (which needs ``right``), in one line."""
        return self.roles.refusal(self.role, right, self.actor, what)

    @property
    def actor(self) -> str:
        """The audit trail's actor: the user's name, or ``token:NAME``."""
        return self.name if self.kind == "user" else f"token:{self.name}"


class Accounts:
    """Users, tokens and sessions over the store's :class:`AccountTable`. ``password_min_chars``:
    the shortest password :meth:`add_user` and :meth:`set_password` take (``[api]
    password_min_chars``); ``throttle``: the sign-in throttle (the process's shared one); ``roles``:
    the built-in roles and the config's ``[roles.NAME]`` (``Runtime.roles``)."""

    def __init__(self, table: AccountTable, *, throttle: SignInThrottle | StoredThrottle | None = None,
                 password_min_chars: int = PASSWORD_MIN_CHARS, roles: Roles = BUILT_IN_ROLES) -> None:
        self.table = table
        self.roles = roles
        self.throttle: SignInThrottle | StoredThrottle = throttle or SHARED
        self.password_min_chars = password_min_chars

    # ----- users ----------------------------------------------------------------------------------
    def add_user(self, name: str, role: str, password: str, *, actor: str, full_name: str | None = None) -> None:
        """AccessError for a bad name, role, password or full name (the printed name of the user's
        electronic signatures), or a name already taken (in any case)."""
        name, role = checked_name(name), self.roles.checked(role)
        full_name = None if full_name is None else checked_full_name(full_name)
        password = checked_password(password, name, self.password_min_chars)
        taken = self.table.add_user(name, role, secrets.hash_password(password), actor, full_name)
        if taken is not None:
            case = "" if taken == name else " (user names are compared without case)"
            raise AccessError(f"user {taken!r} already exists{case} (`exchange users remove {taken}` first)")
        log.info("user %s added with role %s by %s", name, role, actor)

    def remove_user(self, name: str, *, actor: str) -> None:
        """Remove a user: its console sessions end, its OPC UA sessions may write no more.
        UnknownUser; AccessError for the last admin."""
        self._changed(self.table.remove_user(checked_name(name)), name, "removed")
        log.info("user %s removed by %s", name, actor)

    def set_role(self, name: str, role: str, *, actor: str) -> None:
        """Give a user another role, at once for its open sessions (console and OPC UA).
        UnknownUser; AccessError for a bad role, or for the last admin given another role."""
        role = self.roles.checked(role)
        self._changed(self.table.set_user(checked_name(name), role=role), name, f"given the role {role}")
        log.info("user %s given the role %s by %s", name, role, actor)

    def set_full_name(self, name: str, full_name: str | None, *, actor: str) -> str | None:
        """Set (None: clear) the printed name the user's electronic signatures show from now on
        (signatures made before keep theirs); returns it as stored. UnknownUser; AccessError for a
        bad name."""
        full_name = None if full_name is None else checked_full_name(full_name)
        self._changed(self.table.set_full_name(checked_name(name), full_name), name, "renamed")
        log.info("full name of user %s set to %r by %s", name, full_name, actor)
        return full_name

    def set_password(self, name: str, password: str, *, actor: str) -> None:
        """Change a user's password; the user's console sessions end, its OPC UA sessions may write
        no more (they sign in again)."""
        name = checked_name(name)
        password_hash = secrets.hash_password(checked_password(password, name, self.password_min_chars))
        self._changed(self.table.set_user(name, password_hash=password_hash), name, "changed")
        log.info("password of user %s changed by %s", name, actor)

    @staticmethod
    def _changed(change: str, name: str, what: str) -> None:
        if change == "unknown":
            raise UnknownUser(name)
        if change == "last_admin":
            raise AccessError(f"user {name!r} is the last admin and cannot be {what}: add another admin first "
                              "(`exchange users add NAME --role admin`)")

    def user(self, name: str) -> UserRow | None:
        """The user as stored now (None: no such user), for sessions that check it again."""
        return self.table.user(name) if NAME_PATTERN.fullmatch(name) else None

    def list_users(self) -> list[dict[str, Any]]:
        """Each user with its role and that role's rights (none for a role the config lost)."""
        return [{"name": u.name, "full_name": u.full_name, "role": u.role, "rights": self._rights(u.role),
                 "created_by": u.created_by, "created_at": iso(u.created_at)} for u in self.table.list_users()]

    def _rights(self, role: str) -> list[str]:
        held = self.roles.rights_of(role)
        return [right for right in RIGHTS if right in held]  # in the documented order

    # ----- tokens ---------------------------------------------------------------------------------
    def create_token(self, name: str, role: str, *, actor: str) -> str:
        """A new API token's text (shown once: only its digest is stored)."""
        name, role = checked_token_name(name), self.roles.checked(role)
        token_id, secret, token = secrets.new_token()
        if not self.table.add_token(token_id, name, role, secrets.digest(secret), actor):
            raise AccessError(f"a live token named {name!r} exists already: revoke it first "
                              f"(`exchange tokens revoke {name}`) or choose another name")
        log.info("token %s (%s) created with role %s by %s", name, token_id, role, actor)
        return token

    def revoke_token(self, name_or_id: str, *, actor: str) -> int:
        """Revoke the live token of that id, else the live tokens of that name (an id is never
        taken for a name); UnknownUser when none."""
        revoked = self.table.revoke_tokens(checked_name(name_or_id, "token"))
        if not revoked:
            raise UnknownUser(name_or_id, "live token")
        log.info("token %s revoked by %s (%d)", name_or_id, actor, revoked)
        return revoked

    def list_tokens(self) -> list[dict[str, Any]]:
        return [{"id": t.id, "name": t.name, "role": t.role, "created_by": t.created_by,
                 "created_at": iso(t.created_at), "revoked_at": None if t.revoked_at is None else iso(t.revoked_at)}
                for t in self.table.list_tokens()]

    def token_identity(self, token: str) -> Identity | None:
        """The identity of a live token's text, or None (unknown, revoked or malformed)."""
        if len(token) > TOKEN_MAX_CHARS:
            return None
        parts = secrets.split_token(token)
        if parts is None:
            return None
        row = self.table.token(parts[0])
        if row is None or row.revoked_at is not None or not secrets.same(row.secret_hash, secrets.digest(parts[1])):
            return None
        return Identity(name=row.name, role=row.role, kind="token", roles=self.roles)

    # ----- sign-in and sessions -------------------------------------------------------------------
    def authenticate(self, name: str, password: str, *, client: str = "") -> Identity:
        """The user, when the password is right. SignInRefused otherwise (the same message whether
        the user or the password is wrong), or, with ``retry_after_seconds`` set, while this user
        name must wait at this client address (:mod:`~exchange._auth.throttle`)."""
        shown, peer = name[:100] if isinstance(name, str) else "?", client or "?"
        wait = self.throttle.retry_after(shown, peer)
        if wait is not None:
            reason = f"too many failed sign-ins; try again in {max(1, round(wait))} s"
            log.warning("sign-in of %r from %s refused: %s", shown, peer, reason)
            raise SignInRefused(reason, wait)
        row = self.table.user(name) if isinstance(name, str) and NAME_PATTERN.fullmatch(name) else None
        password_ok = isinstance(password, str) and len(password) <= PASSWORD_MAX_CHARS and encodable(password)
        if row is None:
            secrets.dummy_verify(password if password_ok else "")
        if row is None or not password_ok or not secrets.verify_password(row.password_hash, password):
            waits = self.throttle.failed(shown, peer)
            then = f" (this name waits {waits:.0f} s at this address now)" if waits else ""
            log.warning("sign-in of %r from %s refused: %s%s", shown, peer, WRONG_CREDENTIALS, then)
            raise SignInRefused(WRONG_CREDENTIALS)
        self.throttle.succeeded(shown, peer)
        return Identity(name=row.name, role=row.role, kind="user", roles=self.roles, full_name=row.full_name)

    def sign_in(self, name: str, password: str, *, lifetime_seconds: float, client: str = "") -> tuple[str, Identity]:
        """A new console session for the user: ``(session_id, identity)``; the identity carries the
        session's CSRF token. SignInRefused as :meth:`authenticate`."""
        user = self.authenticate(name, password, client=client)
        session_id, csrf = secrets.new_session()
        self.table.add_session(secrets.digest(session_id), user.name, csrf, lifetime_seconds)
        log.info("user %s signed in from %s", user.name, client or "?")
        return session_id, Identity(name=user.name, role=user.role, kind="user", csrf_token=csrf, roles=self.roles,
                                    full_name=user.full_name)

    def session_identity(self, session_id: str) -> Identity | None:
        """The user of a live session (with the user's current role), or None."""
        if not session_id or len(session_id) > TOKEN_MAX_CHARS:
            return None
        row = self.table.session(secrets.digest(session_id))
        if row is None:
            return None
        return Identity(name=row.user.name, role=row.user.role, kind="user", csrf_token=row.csrf_token,
                        roles=self.roles, full_name=row.user.full_name)

    def sign_out(self, session_id: str) -> None:
        if session_id and len(session_id) <= TOKEN_MAX_CHARS:
            self.table.end_session(secrets.digest(session_id))
