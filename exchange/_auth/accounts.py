"""Users, tokens and sessions: the one service the CLI and the HTTP API both use."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from exchange._auth import secrets
from exchange._auth.roles import checked_role
from exchange._auth.throttle import SignInThrottle
from exchange._timefmt import iso_utc as iso
from exchange.errors import AccessError, SignInRefused, UnknownUser
from exchange.workflows._store.accounts import AccountTable

log = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
PASSWORD_MIN_CHARS = 8
PASSWORD_MAX_CHARS = 1024  # argon2 takes any length; a bound keeps a huge body from costing much
TOKEN_MAX_CHARS = 200
WRONG_CREDENTIALS = "wrong user name or password"


@dataclass(frozen=True)
class Identity:
    """Who is calling: a user (signed in, or by password) or an API token."""

    name: str
    role: str
    kind: str  # "user" | "token"
    csrf_token: str | None = None  # console sessions only: unsafe requests must echo it

    @property
    def actor(self) -> str:
        """The audit trail's actor: the user's name, or ``token:NAME``."""
        return self.name if self.kind == "user" else f"token:{self.name}"


def checked_name(name: object, noun: str = "user") -> str:
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
        return name
    shown = repr(name) if isinstance(name, str) and len(name) <= 60 else type(name).__name__
    raise AccessError(f"{noun} name {shown} is not allowed: 1 to 100 letters, digits and . _ @ -, "
                      "starting with a letter or digit")


def checked_password(password: object) -> str:
    if not isinstance(password, str) or not PASSWORD_MIN_CHARS <= len(password) <= PASSWORD_MAX_CHARS:
        raise AccessError(f"a password has {PASSWORD_MIN_CHARS} to {PASSWORD_MAX_CHARS} characters")
    return password


class Accounts:
    """Users, tokens and sessions over the store's :class:`AccountTable`."""

    def __init__(self, table: AccountTable, *, throttle: SignInThrottle | None = None) -> None:
        self.table = table
        self.throttle = throttle or SignInThrottle()

    # ----- users ----------------------------------------------------------------------------------
    def add_user(self, name: str, role: str, password: str, *, actor: str) -> None:
        """AccessError for a bad name, role or password, or a name already taken."""
        name, role, password = checked_name(name), checked_role(role), checked_password(password)
        if not self.table.add_user(name, role, secrets.hash_password(password), actor):
            raise AccessError(f"user {name!r} already exists (`exchange users remove {name}` first)")
        log.info("user %s added with role %s by %s", name, role, actor)

    def remove_user(self, name: str, *, actor: str) -> None:
        if not self.table.remove_user(checked_name(name)):
            raise UnknownUser(name)
        log.info("user %s removed by %s", name, actor)

    def set_password(self, name: str, password: str, *, actor: str) -> None:
        """Change a user's password; the user's console sessions end."""
        if not self.table.set_user(checked_name(name), password_hash=secrets.hash_password(checked_password(password))):
            raise UnknownUser(name)
        log.info("password of user %s changed by %s", name, actor)

    def list_users(self) -> list[dict[str, Any]]:
        return [{"name": u.name, "role": u.role, "created_by": u.created_by, "created_at": iso(u.created_at)}
                for u in self.table.list_users()]

    # ----- tokens ---------------------------------------------------------------------------------
    def create_token(self, name: str, role: str, *, actor: str) -> str:
        """A new API token's text (shown once: only its digest is stored)."""
        name, role = checked_name(name, "token"), checked_role(role)
        token_id, secret, token = secrets.new_token()
        self.table.add_token(token_id, name, role, secrets.digest(secret), actor)
        log.info("token %s (%s) created with role %s by %s", name, token_id, role, actor)
        return token

    def revoke_token(self, name_or_id: str, *, actor: str) -> int:
        """Revoke the live tokens of that name (or the token of that id); UnknownUser when none."""
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
        return Identity(name=row.name, role=row.role, kind="token")

    # ----- sign-in and sessions -------------------------------------------------------------------
    def authenticate(self, name: str, password: str, *, client: str = "") -> Identity:
        """The user, when the password is right. SignInRefused otherwise (the same message whether
        the user or the password is wrong), or when too many attempts failed for this user name or
        this client (``retry_after_seconds`` set)."""
        keys = (f"user:{name[:100]}", f"client:{client}")
        wait = self.throttle.retry_after(*keys)
        if wait is not None:
            raise SignInRefused(f"too many failed sign-ins; try again in {max(1, round(wait))} s", wait)
        row = self.table.user(name) if isinstance(name, str) and NAME_PATTERN.fullmatch(name) else None
        password_ok = isinstance(password, str) and len(password) <= PASSWORD_MAX_CHARS
        if row is None:
            secrets.dummy_verify(password if password_ok else "")
        if row is None or not password_ok or not secrets.verify_password(row.password_hash, password):
            self.throttle.failed(*keys)
            log.warning("sign-in refused for %r from %s", name[:100], client or "?")
            raise SignInRefused(WRONG_CREDENTIALS)
        self.throttle.succeeded(keys[0])
        return Identity(name=row.name, role=row.role, kind="user")

    def sign_in(self, name: str, password: str, *, lifetime_seconds: float, client: str = "") -> tuple[str, Identity]:
        """A new console session for the user: ``(session_id, identity)``; the identity carries the
        session's CSRF token. SignInRefused as :meth:`authenticate`."""
        user = self.authenticate(name, password, client=client)
        session_id, csrf = secrets.new_session()
        self.table.add_session(secrets.digest(session_id), user.name, csrf, lifetime_seconds)
        log.info("user %s signed in from %s", user.name, client or "?")
        return session_id, Identity(name=user.name, role=user.role, kind="user", csrf_token=csrf)

    def session_identity(self, session_id: str) -> Identity | None:
        """The user of a live session (with the user's current role), or None."""
        if not session_id or len(session_id) > TOKEN_MAX_CHARS:
            return None
        row = self.table.session(secrets.digest(session_id))
        if row is None:
            return None
        return Identity(name=row.user.name, role=row.user.role, kind="user", csrf_token=row.csrf_token)

    def sign_out(self, session_id: str) -> None:
        if session_id and len(session_id) <= TOKEN_MAX_CHARS:
            self.table.end_session(secrets.digest(session_id))
