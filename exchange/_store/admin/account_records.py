"""Users, API tokens and console sessions: their rows, nothing more.

Hashing, roles and the checks live in :mod:`exchange._auth`; this module stores what it is handed,
except for the checks that must be made in the transaction that writes (a name taken in another case,
the last admin, a live token's name), so that two gateways cannot both pass them. Each method is one
short transaction. Times are the store's clock (seconds since the epoch), so several gateways agree on
when a session expires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from exchange._roles import ADMIN
from exchange._store.sql import Database
from exchange._store.tables import schema

Change = Literal["done", "unknown", "last_admin"]  # what became of a change to a user


@dataclass(frozen=True)
class UserRow:
    name: str
    role: str
    password_hash: str
    created_by: str
    created_at: float
    full_name: str | None = None  # the printed name of the user's electronic signatures


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
class FailureRow:
    failures: int
    last_failure_at: float  # store clock
    wait_seconds: float  # before the next attempt is checked, from last_failure_at


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
    def add_user(self, name: str, role: str, password_hash: str, created_by: str,
                 full_name: str | None = None) -> str | None:
        """Insert a user; the name of the user that already has this name in any case (``Anna``
        for ``anna``) instead, changing nothing."""
        users = schema.users
        try:
            with self.db.transaction(f"add user {name}") as conn:
                # Adds one at a time: nothing else holds back an add of "anna" while "Anna", not
                # yet inserted, is being added.
                self.db.backend.lock_table_for_inserts(conn, users)
                taken = [row[0] for row in conn.execute(select(users.c.name))
                         if row[0].lower() == name.lower()]
                if taken:
                    return str(taken[0])
                conn.execute(insert(users).values(name=name, role=role, password_hash=password_hash,
                                                  created_by=created_by, created_at=self.now(),
                                                  full_name=full_name))
        except IntegrityError:  # another process added the same name between the check and the insert
            return name
        return None

    def set_user(self, name: str, *, role: str | None = None, password_hash: str | None = None,
                 keep_an_admin: bool = True) -> Change:
        """Change a user's role and/or password hash. A changed password ends the user's sessions;
        with ``keep_an_admin`` the last admin is not given another role (``"last_admin"``)."""
        users = schema.users
        values: dict[str, str] = {}
        if role is not None:
            values["role"] = role
        if password_hash is not None:
            values["password_hash"] = password_hash
        with self.db.transaction(f"change user {name}") as conn:
            if role is not None and role != ADMIN and keep_an_admin and self._last_admin(conn, name):
                return "last_admin"
            changed = conn.execute(update(users).where(users.c.name == name).values(**values)).rowcount
            if changed and password_hash is not None:
                conn.execute(delete(schema.sessions).where(schema.sessions.c.user_name == name))
        return "done" if changed else "unknown"

    def set_full_name(self, name: str, full_name: str | None) -> Change:
        """Set (None: clear) a user's printed name."""
        users = schema.users
        with self.db.transaction(f"change user {name}") as conn:
            changed = conn.execute(update(users).where(users.c.name == name).values(full_name=full_name)).rowcount
        return "done" if changed else "unknown"

    def remove_user(self, name: str, *, keep_an_admin: bool = True) -> Change:
        """Delete a user and end its sessions; with ``keep_an_admin`` the last admin stays
        (``"last_admin"``)."""
        users = schema.users
        with self.db.transaction(f"remove user {name}") as conn:
            if keep_an_admin and self._last_admin(conn, name):
                return "last_admin"
            conn.execute(delete(schema.sessions).where(schema.sessions.c.user_name == name))
            return "done" if conn.execute(delete(users).where(users.c.name == name)).rowcount else "unknown"

    @staticmethod
    def _last_admin(conn: Connection, name: str) -> bool:
        """True when ``name`` is the only admin. The admins' rows are locked (PostgreSQL), so two
        removals of the last two admins cannot both go through."""
        users = schema.users
        admins = [row[0] for row in conn.execute(select(users.c.name).where(users.c.role == ADMIN)
                                                 .with_for_update())]
        return admins == [name]

    def user(self, name: str) -> UserRow | None:
        users = schema.users
        with self.db.read() as conn:
            row = conn.execute(select(users).where(users.c.name == name)).first()
        return None if row is None else UserRow(*row)

    def list_users(self) -> list[UserRow]:
        users = schema.users
        with self.db.read() as conn:
            return [UserRow(*row) for row in conn.execute(select(users).order_by(users.c.name))]

    # ----- failed sign-ins of the command line ----------------------------------------------------
    def sign_in_failure(self, user_key: str, client: str) -> FailureRow | None:
        """The failures counted for ``user_key`` from ``client``, if any."""
        failures = schema.sign_in_failures
        with self.db.read() as conn:
            row = conn.execute(select(failures.c.failures, failures.c.last_failure_at, failures.c.wait_seconds)
                               .where(failures.c.user_key == user_key, failures.c.client == client)).first()
        return None if row is None else FailureRow(int(row[0]), float(row[1]), float(row[2]))

    def count_sign_in_failure(self, user_key: str, client: str, *, forget_after_seconds: float,
                              wait_for: Callable[[int], float]) -> float:
        """Count one more failure of ``user_key`` from ``client`` (a count older than
        ``forget_after_seconds`` starts again from one); the wait it now has, ``wait_for(failures)``.
        One transaction: two processes failing at once count two."""
        failures = schema.sign_in_failures
        where = (failures.c.user_key == user_key, failures.c.client == client)
        with self.db.transaction(f"a failed sign-in of {user_key}") as conn:
            self.db.backend.lock_table_for_inserts(conn, failures)
            now = self.now()
            row = conn.execute(select(failures.c.failures, failures.c.last_failure_at).where(*where)).first()
            count = 1 if row is None or now - float(row[1]) > forget_after_seconds else int(row[0]) + 1
            wait = wait_for(count)
            if row is None:
                conn.execute(insert(failures).values(user_key=user_key, client=client, failures=count,
                                                     last_failure_at=now, wait_seconds=wait))
            else:
                conn.execute(update(failures).where(*where).values(failures=count, last_failure_at=now,
                                                                   wait_seconds=wait))
        return wait

    def clear_sign_in_failures(self, user_key: str, client: str) -> None:
        failures = schema.sign_in_failures
        with self.db.transaction(f"a sign-in of {user_key}") as conn:
            conn.execute(delete(failures).where(failures.c.user_key == user_key, failures.c.client == client))

    # ----- tokens ---------------------------------------------------------------------------------
    def add_token(self, token_id: str, name: str, role: str, secret_hash: str, created_by: str) -> bool:
        """Store a token; False (nothing stored) when a live token has this name already."""
        tokens = schema.api_tokens
        with self.db.transaction(f"create token {name}") as conn:
            live = conn.execute(select(tokens.c.name).where(tokens.c.revoked_at.is_(None)).with_for_update()).all()
            if any(row[0] == name for row in live):
                return False
            conn.execute(insert(tokens).values(
                id=token_id, name=name, role=role, secret_hash=secret_hash, created_by=created_by,
                created_at=self.now(), revoked_at=None,
            ))
        return True

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
        """Revoke the live token whose id is ``name_or_id``, or else the live tokens of that name
        (an id never stands for a name too); how many."""
        tokens = schema.api_tokens
        live = tokens.c.revoked_at.is_(None)
        with self.db.transaction(f"revoke token {name_or_id}") as conn:
            by_id = conn.execute(update(tokens).where(tokens.c.id == name_or_id, live)
                                 .values(revoked_at=self.now())).rowcount
            if by_id:
                return int(by_id)
            return int(conn.execute(update(tokens).where(tokens.c.name == name_or_id, live)
                                    .values(revoked_at=self.now())).rowcount)

    # ----- sessions -------------------------------------------------------------------------------
    def add_session(self, id_hash: str, user_name: str, csrf_token: str, lifetime_seconds: float) -> float:
        """Store a session; returns when it expires (store clock). Expired sessions are swept here."""
        sessions = schema.sessions
        now = self.now()
        with self.db.transaction(f"sign in {user_name}") as conn:
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
        return SessionRow(user=UserRow(*row[:6]), csrf_token=row[6], expires_at=row[7])

    def end_session(self, id_hash: str) -> None:
        with self.db.transaction("sign out") as conn:
            conn.execute(delete(schema.sessions).where(schema.sessions.c.id_hash == id_hash))
