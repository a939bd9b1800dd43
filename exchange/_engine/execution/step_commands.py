"""The commands a long step takes from its run's mailbox while it works.

A step that lasts (``phase.run`` following a PLC phase, a wait that honours HOLD) cannot wait in
``recvCommand``: it waits for its device. :class:`StepCommands` lets it look at the command topic
between two looks at the device, as cheaply as a mailbox wait: with a gateway's mail watcher it reads
the store only when the watcher said mail arrived since its last look (or when the step asks it to
look again, its own state having changed); without one, at most every ``mailbox_poll_ms``.

What it finds is judged by the ISA-88 policy of :mod:`exchange._engine.model.commands` in the state
the step gives, and handed back unconsumed: the step acts on the chosen command and commits the
messages it took with its progress (:meth:`RunContext.note_step`), so a command is consumed exactly
when what it caused is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

from exchange._engine.execution.context import RunContext
from exchange._engine.model import commands

MESSAGES_PER_LOOK = 50


class StepCommands:
    """Looks at one run's command topic for a step (see the module docstring)."""

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._generation: int | None = None  # the mail generation of the last look that took nothing
        self._looked_at = 0.0  # monotonic time of that look (without a watcher)

    def again(self) -> None:
        """Look at the next :meth:`take` even if no mail arrived (the step's state changed: a command
        left waiting may be acceptable now)."""
        self._generation = None

    def due(self) -> bool:
        """Whether a look would read the store now."""
        ctx = self._ctx
        if ctx.mail_watched:
            return self._generation != ctx.mail_generation
        poll_seconds = ctx.settings.mailbox_poll_ms / 1000
        return self._generation is None or time.monotonic() - self._looked_at >= poll_seconds

    def pause_seconds(self, wanted_seconds: float) -> float:
        """How long the step may sleep before its next look is due (its own ``wanted_seconds`` at most)."""
        ctx = self._ctx
        if ctx.mail_watched:
            return wanted_seconds  # the watcher rings the run's mail bell
        return max(0.0, min(wanted_seconds, ctx.settings.mailbox_poll_ms / 1000))

    def take(self, state: str, acts_on: Collection[str] | None = None, about: Mapping[str, Any] | None = None
             ) -> commands.JudgedCommands | None:
        """The commands waiting, judged in ``state`` (the policy drops what ``state`` does not accept),
        or None when there is nothing to look at. ``acts_on`` (command names): judge them only when
        one of these is among them, else leave them all waiting (a step on its way between two
        states takes a STOP now, and a RESUME only once it is held); None: judge whatever waits.
        Nothing is consumed: the caller commits ``taken`` with what it does."""
        if not self.due():
            return None
        ctx = self._ctx
        generation = ctx.mail_generation
        found = ctx.store.mailbox.pending(ctx.run_id, commands.COMMAND_TOPIC, MESSAGES_PER_LOOK)
        parsed = [commands.Command.parse(message) for message in found]
        if not found or (acts_on is not None and not any(c.name in acts_on for c in parsed)):
            self._generation, self._looked_at = generation, time.monotonic()
            return None
        self._generation = None  # what was not taken is looked at again next time
        return commands.judge_commands(found, state, about=about)
