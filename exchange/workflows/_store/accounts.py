"""Users, API tokens and console sessions: their rows, nothing more.

Hashing, roles and every check live in :mod:`exchange._auth`; this module stores what it is handed.
Each method is one short transaction. Times are the store's clock (seconds since the epoch), so
several gateways agree on when a session expires.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from exchange.workflows._store import schema
from exchange.workflows._store.database import Database


@dataclass(frozen=True)
class UserRow:
    name: str
    role: str
    password_hash: str
    created_by: str
    created_at: float


@dataclass(frozen=True)
class TokenRow:
    id: str
    name: str
    role: str
    secret_hash: str
    created_by: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class SessionRow:
    user: UserRow
    csrf_token: str
    expires_at: float


class AccountTable:
    """The ``exchange_users``, ``exchange_tokens`` and ``exchange_sessions`` tables."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def now(self) -> float:
        return self.db.clock.now()

    # ----- users ----------------------------------------------------------------------------------
    def add_user(self, name: str, role: str, password_hash: str, created_by: str) -> bool:
        """Insert a user; False (nothing changed) when the name is taken."""
        users = schema.users
        try:
            with self.db.write(f"add user {name}") as conn:
                if conn.execute(select(users.c.name).where(users.c.name == name)).first() is not None:
                    return False
                conn.execute(insert(users).values(name=name, role=role, password_hash=password_hash,
                                                  created_by=created_by, created_at=self.now()))
        except IntegrityError:  # another process added the same name between the check and the insert
            return False
        return True

    def set_user(self, name: str, *, role: str | None = None, password_hash: str | None = None) -> bool:
        """Change a user's role and/or password hash; False when there is no such user. A changed
        password ends the user's sessions."""
        users = schema.users
        values: dict[str, str] = {}
        if role is not None:
            values["role"] = role
        if password_hash is not None:
            values["password_hash"] = password_hash
        with self.db.write(f"change user {name}") as conn:
            changed = conn.execute(update(users).where(users.c.name == name).values(**values)).rowcount
            if changed and password_hash is not None:
                conn.execute(delete(schema.sessions).where(schema.sessions.c.user_name == name))
        return bool(changed)

    def remove_user(self, name: str) -> bool:
        """Delete a user and end its sessions; False when there is no such user."""
        users = schema.users
        with self.db.write(f"remove user {name}") as conn:
            conn.execute(delete(schema.sessions).where(schema.sessions.c.user_name == name))
            return bool(conn.execute(delete(users).where(users.c.name == name)).rowcount)

    def user(self, name: str) -> UserRow | None:
        users = schema.users
        with self.db.read() as conn:
            row = conn.execute(select(users).where(users.c.name == name)).first()
        return None if row is None else UserRow(*row)

    def list_users(self) -> list[UserRow]:
        users = schema.users
        with self.db.read() as conn:
            return [UserRow(*row) for row in conn.execute(select(users).order_by(users.c.name))]

    # ----- tokens ---------------------------------------------------------------------------------
    def add_token(self, token_id: str, name: str, role: str, secret_hash: str, created_by: str) -> None:
        with self.db.write(f"create token {name}") as conn:
            conn.execute(insert(schema.api_tokens).values(
                id=token_id, name=name, role=role, secret_hash=secret_hash, created_by=created_by,
                created_at=self.now(), revoked_at=None,
            ))

    def token(self, token_id: str) -> TokenRow | None:
        tokens = schema.api_tokens
        with self.db.read() as conn:
            row = conn.execute(select(tokens).where(tokens.c.id == token_id)).first()
        return None if row is None else TokenRow(*row)

    def list_tokens(self) -> list[TokenRow]:
        tokens = schema.api_tokens
        with self.db.read() as conn:
            rows = conn.execute(select(tokens).order_by(tokens.c.name, tokens.c.created_at)).all()
        return [TokenRow(*row) for row in rows]

    def revoke_tokens(self, name_or_id: str) -> int:
        """Revoke the live tokens named ``name_or_id`` (or the one with that id); how many."""
        tokens = schema.api_tokens
        with self.db.write(f"revoke token {name_or_id}") as conn:
            return int(conn.execute(
                update(tokens)
                .where((tokens.c.name == name_or_id) | (tokens.c.id == name_or_id), tokens.c.revoked_at.is_(None))
                .values(revoked_at=self.now())
            ).rowcount)

    # ----- sessions -------------------------------------------------------------------------------
    def add_session(self, id_hash: str, user_name: str, csrf_token: str, lifetime_seconds: float) -> float:
        """Store a session; returns when it expires (store clock). Expired sessions are swept here."""
        sessions = schema.sessions
        now = self.now()
        with self.db.write(f"sign in {user_name}") as conn:
            conn.execute(delete(sessions).where(sessions.c.expires_at <= now))
            conn.execute(insert(sessions).values(id_hash=id_hash, user_name=user_name, csrf_token=csrf_token,
                                                 created_at=now, expires_at=now + lifetime_seconds))
        return now + lifetime_seconds

    def session(self, id_hash: str) -> SessionRow | None:
        """The live session with this id hash and its user (as the user is now), or None."""
        sessions, users = schema.sessions, schema.users
        with self.db.read() as conn:
            row = conn.execute(
                select(users, sessions.c.csrf_token, sessions.c.expires_at)
                .select_from(sessions.join(users, users.c.name == sessions.c.user_name))
                .where(sessions.c.id_hash == id_hash, sessions.c.expires_at > self.now())
            ).first()
        if row is None:
            return None
        return SessionRow(user=UserRow(*row[:5]), csrf_token=row[5], expires_at=row[6])

    def end_session(self, id_hash: str) -> None:
        with self.db.write("sign out") as conn:
            conn.execute(delete(schema.sessions).where(schema.sessions.c.id_hash == id_hash))
