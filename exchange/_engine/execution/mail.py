"""A run's wait on its own mailbox: for messages of a topic, for the commands of an operator.

Every in-run wait for mail goes through :func:`wait_for_mail` (``recv``, ``recvCommand``, a step held
for an operator, a prompt), so a thousand waiting runs cost no queries while nothing arrives (see
"How a waiting run learns of a message" in docs/architecture.md). :func:`commands_waiting` is the
one look at the command topic outside such a wait (a step waiting for a device notices a STOP).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from exchange._engine.execution import waitpoints
from exchange._engine.execution.context import RunContext
from exchange._engine.model import COMMAND_TOPIC, Command
from exchange._store import MessageRecord

# Commands read by one look outside a mailbox wait (a device wait asking whether a STOP is waiting).
COMMANDS_PER_LOOK = 50


@dataclass(frozen=True, slots=True)
class MailLook:
    """One thing a wait looks for in the run's mailbox: the messages of ``topic`` (at most
    ``limit``) that ``wanted`` accepts. ``note`` names the look's "read since the last ring" mark:
    two looks at one topic for different purposes (a receive, and a prompt's look for a STOP) keep
    marks of their own, so one that ignores a message never hides it from the other."""

    topic: str
    limit: int
    wanted: Callable[[list[MessageRecord]], bool] = bool
    note: str = ""

    @property
    def mark(self) -> str:
        return self.note or self.topic


def wait_for_mail(ctx: RunContext, looks: list[MailLook], timeout_seconds: float
                  ) -> tuple[MailLook, list[MessageRecord]] | None:
    """Wait until one of ``looks`` finds what it wants (the look and what it found), the timeout
    passes (None), or the run must stop (raises).

    With a mail watcher (a gateway) the wait costs no query: each look reads the mailbox when the
    wait starts and again only when the watcher says messages arrived since that look's last read
    that found nothing wanted (the generation is noted before the read, so a message committed
    during it moves the generation and is read next time round). Without one it polls every
    ``mailbox_poll_ms``.
    """
    store = ctx.store
    poll_seconds = ctx.settings.mailbox_poll_ms / 1000
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    while True:
        ctx.check_cancelled()
        ctx.mail_event.clear()
        generation = ctx.mail_generation
        for look in looks:
            if ctx.mail_watched and ctx.mail_checked.get(look.mark) == generation:
                continue
            waitpoints.reached(waitpoints.READ, ctx.run_id, look.mark)
            found = store.mailbox.pending(ctx.run_id, look.topic, look.limit)
            if found and look.wanted(found):
                return look, found
            waitpoints.reached(waitpoints.READ_EMPTY, ctx.run_id, look.mark)
            ctx.mail_checked[look.mark] = generation
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        waitpoints.reached(waitpoints.SLEEP, ctx.run_id, looks[0].mark)
        ctx.mail_event.wait(remaining if ctx.mail_watched else min(remaining, poll_seconds))


def wait_for_messages(ctx: RunContext, topic: str, timeout_seconds: float, limit: int) -> list[MessageRecord]:
    """The first messages of ``topic`` to arrive within ``timeout_seconds`` (see :func:`wait_for_mail`)."""
    got = wait_for_mail(ctx, [MailLook(topic, limit)], timeout_seconds)
    return [] if got is None else got[1]


def commands_waiting(ctx: RunContext, limit: int = COMMANDS_PER_LOOK) -> list[Command]:
    """The commands waiting in the run's mailbox (the oldest ``limit``), parsed; nothing is consumed.
    One query: for a wait that is not a mailbox wait (a step waiting for a device) and asks now and
    then whether an operator wants the run to stop."""
    return [Command.parse(message) for message in ctx.store.mailbox.pending(ctx.run_id, COMMAND_TOPIC, limit)]
