"""Who an OPC UA session is: anonymous (read only), or a user of the HTTP API and the console,
checked with the same passwords and the same sign-in throttle (per user name and peer address).

asyncua asks synchronously, at session activation, and does not say from where: the server's
sessions are :class:`PeerSession`, which note their peer's address for the duration of that call.
A refused password refuses the session (BadUserAccessDenied). What a session may write is decided
again at every write (:meth:`ExchangeUsers.role_now`), from the user as stored then: a removed user,
one given another role or a new password loses its rights at once, open session or not."""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Any

from asyncua import ua
from asyncua.crypto.permission_rules import USER_TYPES, SimpleRoleRuleset, User, UserRole
from asyncua.server.internal_session import InternalSession
from asyncua.server.user_managers import UserManager
from asyncua.ua.object_ids import ObjectIds

from exchange._auth.accounts import Accounts
from exchange.errors import AccessError

log = logging.getLogger(__name__)

_CHANGING_REQUESTS = {ObjectIds.WriteRequest_Encoding_DefaultBinary, ObjectIds.CallRequest_Encoding_DefaultBinary,
                      ObjectIds.HistoryUpdateRequest_Encoding_DefaultBinary}
_PEER: contextvars.ContextVar[str] = contextvars.ContextVar("exchange_opcua_peer", default="")


class ReadOnlyAnonymous(SimpleRoleRuleset):
    """asyncua's roles, except that anonymous sessions may read, browse and subscribe (asyncua's own
    rules let them do nothing at all); writes and method calls stay refused to them."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        reading = {ua.NodeId(kind) for kind in USER_TYPES if kind not in _CHANGING_REQUESTS}  # type: ignore[arg-type]  # as asyncua builds them
        self._permission_dict[UserRole.Anonymous] = reading


def peer_host(name: object) -> str:
    """The address of asyncua's session name (its connection's ``peername``: ``(host, port)``)."""
    if isinstance(name, tuple) and name and isinstance(name[0], str):
        return name[0]
    return ""


class PeerSession(InternalSession):
    """asyncua's session, whose activation tells the user manager the peer's address."""

    def activate_session(self, params: ua.ActivateSessionParameters,
                         peer_certificate: bytes | None) -> ua.ActivateSessionResult:
        token = _PEER.set(peer_host(self.name))
        try:
            return super().activate_session(params, peer_certificate)
        finally:
            _PEER.reset(token)


def use_peer_sessions(iserver: Any) -> None:
    """Make ``iserver`` (asyncua's InternalServer) create :class:`PeerSession` for its clients."""

    def create_session(name: Any, user: User = User(role=UserRole.Anonymous),
                       external: bool = False) -> InternalSession:
        return PeerSession(iserver, iserver.aspace, iserver.subscription_service, name, user=user, external=external)

    iserver.create_session = create_session


@dataclass
class SignedIn(User):
    """A signed-in session's user, with the password hash it signed in against: a new password
    since then takes its rights away."""

    password_hash: str = ""


class ExchangeUsers(UserManager):
    """Anonymous sessions get the Anonymous role; a user name and password must be an Exchange
    user's (any role: the role decides what it may write, see :meth:`role_now`)."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def get_user(self, iserver: Any, username: str | None = None, password: str | None = None,
                 certificate: Any = None) -> User | None:
        if username is None:
            return User(role=UserRole.Anonymous)
        try:
            identity = self.accounts.authenticate(username, password or "", client=_PEER.get())
        except AccessError:  # logged by authenticate, with the address
            return None
        row = self.accounts.user(identity.name)
        if row is None:  # removed since the line above
            return None
        log.info("OPC UA session of user %s (%s) from %s", identity.name, row.role, _PEER.get() or "?")
        return SignedIn(role=UserRole.User, name=identity.name, password_hash=row.password_hash)

    def role_now(self, user: User, doing: str) -> str | None:
        """The Exchange role of a session's user as stored now; None for an anonymous session, and
        for a user removed or given a new password since the session signed in (logged, naming
        what ``doing`` was refused). Reads the store: call it off the event loop."""
        if user.role is UserRole.Anonymous or not user.name:
            return None
        row = self.accounts.user(user.name)
        why = None
        if row is None:
            why = f"user {user.name!r} no longer exists"
        elif isinstance(user, SignedIn) and row.password_hash != user.password_hash:
            why = f"user {user.name!r} has a new password since the session signed in"
        if why is not None:
            log.warning("OPC UA %s from opcua:%s refused: %s", doing, user.name, why)
            return None
        assert row is not None
        return row.role
