"""Named points inside a run's waits, where a test can act at an exact moment.

A message can reach a waiting run at any moment: before its wait starts, while it reads the store,
while it sleeps, between two waits. Delivery is proven by sending at each of these moments in turn
rather than at random ones (``tests/engine/test_delivery.py``): the run's own thread calls
:func:`reached` at each point, and a test that installed a hook sends its message there, on that
thread, before the wait goes on.

The points, each given the run id and what the wait is for (a mailbox look's name: its topic, or
for a prompt's look for a STOP ``prompt KEY: stop``; or ``child:RUN`` / ``event:RUN/KEY``):

``read``
    right before the wait reads the store (a mailbox wait: after it noted the mail generation);
``read_empty``
    the read found nothing, before the wait notes that it looked;
``sleep``
    right before the wait sleeps until it is woken or its poll interval passes.

With no hook installed (production) each point costs one global lookup.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["READ", "READ_EMPTY", "SLEEP", "Hook", "install", "reached"]

READ = "read"
READ_EMPTY = "read_empty"
SLEEP = "sleep"

Hook = Callable[[str, str, str], None]  # (point, run id, what the wait is for)

_hook: Hook | None = None


def install(hook: Hook | None) -> Hook | None:
    """Call ``hook`` at every point from now on (None: no hook); returns the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def reached(point: str, run_id: str, waiting_for: str) -> None:
    """The run's thread is at ``point`` of a wait for ``waiting_for``."""
    hook = _hook
    if hook is not None:
        hook(point, run_id, waiting_for)
