"""Who an OPC UA session is: anonymous (read only), or a user of the HTTP API and the console,
checked with the same passwords and sign-in throttle. asyncua asks synchronously, at session
activation; a refused password refuses the session (BadUserAccessDenied)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from asyncua import ua
from asyncua.crypto.permission_rules import USER_TYPES, SimpleRoleRuleset, User, UserRole
from asyncua.server.user_managers import UserManager
from asyncua.ua.object_ids import ObjectIds

from exchange._auth.accounts import Accounts
from exchange.errors import AccessError

log = logging.getLogger(__name__)


_CHANGING_REQUESTS = {ObjectIds.WriteRequest_Encoding_DefaultBinary, ObjectIds.CallRequest_Encoding_DefaultBinary,
                      ObjectIds.HistoryUpdateRequest_Encoding_DefaultBinary}


class ReadOnlyAnonymous(SimpleRoleRuleset):
    """asyncua's roles, except that anonymous sessions may read, browse and subscribe (asyncua's own
    rules let them do nothing at all); writes and method calls stay refused to them."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        reading = {ua.NodeId(kind) for kind in USER_TYPES if kind not in _CHANGING_REQUESTS}  # type: ignore[arg-type]  # as asyncua builds them
        self._permission_dict[UserRole.Anonymous] = reading


class ExchangeUsers(UserManager):
    """Anonymous sessions get the Anonymous role; a user name and password must be an Exchange
    user's (any role: the role decides what it may write, see :meth:`role_of`)."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts
        self._roles: dict[str, str] = {}  # user name -> Exchange role, from the last sign-in
        self._lock = threading.Lock()

    def get_user(self, iserver: Any, username: str | None = None, password: str | None = None,
                 certificate: Any = None) -> User | None:
        if username is None:
            return User(role=UserRole.Anonymous)
        try:
            identity = self.accounts.authenticate(username, password or "", client="opcua")
        except AccessError as exc:
            log.warning("OPC UA sign-in of %r refused: %s", username, exc)
            return None
        with self._lock:
            self._roles[identity.name] = identity.role
        return User(role=UserRole.User, name=identity.name)

    def role_of(self, user: User) -> str | None:
        """The Exchange role of a signed-in session's user (None: anonymous or unknown)."""
        if user.role is UserRole.Anonymous or not user.name:
            return None
        with self._lock:
            return self._roles.get(user.name)
