"""Writes from OPC UA clients. A write to a ``Command`` variable is an operator command: anonymous
sessions and users whose role lacks the ``command`` right are refused (BadUserAccessDenied; the
user's role is read from the store at each write, so a removed or demoted user is refused at once),
a value that is not a command is refused (BadInvalidArgument), and a command the run's state would drop is not sent
(BadInvalidState) — nothing is sent in any of these cases. An accepted command is posted to the
run's mailbox with ``opcua:<user>`` as the actor and shows in the variable. Every other write goes
to asyncua's own attribute service unchanged (read-only variables refuse it there)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from asyncua import ua
from asyncua.crypto.permission_rules import User, UserRole
from asyncua.ua.attribute_ids import AttributeIds
from asyncua.ua.status_codes import StatusCodes

from exchange._auth.roles import COMMAND
from exchange._engine import normalise_command
from exchange._opcua_server.nodes import RunNodes
from exchange._opcua_server.users import ExchangeUsers
from exchange.errors import CommandRefused, ExchangeError, UnknownCommand

log = logging.getLogger(__name__)

REASON = "written to Command over OPC UA"
Send = Callable[[str, str, str], None]  # (run id, command, actor): posts it, raising ExchangeError


def _status(code: int) -> ua.StatusCode:
    return ua.StatusCode(ua.UInt32(code))


class GuardedAttributes:
    """Stands in for the server's attribute service: ``write`` handles Command nodes, everything
    else is the wrapped service's."""

    def __init__(self, inner: Any, nodes: RunNodes, users: ExchangeUsers, send: Send) -> None:
        self._inner = inner
        self._nodes = nodes
        self._users = users
        self._send = send

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def write(self, params: ua.WriteParameters, user: User = User(role=UserRole.Admin)) -> list[ua.StatusCode]:
        results: list[ua.StatusCode] = []
        for item in params.NodesToWrite:
            if user.role is not UserRole.Admin and item.NodeId in self._nodes.command_targets:
                results.append(await self._command(item, user))
            else:  # the server's own writes (Admin) and every other node
                single = ua.WriteParameters()
                single.NodesToWrite = [item]
                results.extend(await self._inner.write(single, user=user))
        return results

    async def _command(self, item: ua.WriteValue, user: User) -> ua.StatusCode:
        text = item.Value.Value.Value if item.Value is not None and item.Value.Value is not None else None
        doing = text.strip().upper() if isinstance(text, str) and len(text) <= 20 else "write"
        # the user as stored now, not as it signed in: removed or demoted, it may write no more
        role = await asyncio.get_running_loop().run_in_executor(None, self._users.role_now, user, doing)
        if role is None or COMMAND not in self._users.accounts.roles.rights_of(role):
            if role is not None:
                log.warning("OPC UA %s from opcua:%s refused: role %s lacks the right %r", doing, user.name, role,
                            COMMAND)
            return _status(StatusCodes.BadUserAccessDenied)
        if item.AttributeId != AttributeIds.Value or text is None:
            return _status(StatusCodes.BadInvalidArgument)
        try:
            cmd = normalise_command(text)
        except UnknownCommand:
            return _status(StatusCodes.BadInvalidArgument)
        run_id = self._nodes.run_for_command(item.NodeId)
        if run_id is None:
            return _status(StatusCodes.BadNodeIdUnknown)
        actor = f"opcua:{user.name}"
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._send, run_id, cmd, actor)
        except CommandRefused as exc:
            log.info("OPC UA %s from %s to run %s not sent: %s", cmd, actor, run_id, exc)
            return _status(StatusCodes.BadInvalidState)
        except ExchangeError as exc:
            log.warning("OPC UA %s from %s to run %s failed: %s", cmd, actor, run_id, exc)
            return _status(StatusCodes.BadInvalidState)
        await self._nodes.echo_command(item.NodeId, cmd)
        log.info("OPC UA %s sent to run %s by %s", cmd, run_id, actor)
        return _status(StatusCodes.Good)
