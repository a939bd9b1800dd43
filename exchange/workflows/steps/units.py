"""``units.acquire``: hold a unit (a vessel, a line: ``[units.NAME]`` in the config) while a block
of the workflow runs, one run at a time, across gateways.

    with units.acquire("R1"): ...                          # waits until R1 is free
    with units.acquire(unit_class="reactor") as name: ...   # the first free reactor
    with units.acquire("R1", "TK2") as names: ...           # all or none

Waiting runs are granted in order of run priority, then request time; the wait is a mailbox wait
(cheap, woken at once by a release on any gateway) and one recorded step, so a replay gets the same
units without asking again. The units are released when the ``with`` ends, however it ends, and when
the run ends (a run held on a failure keeps them: the vessel is in its hands). ``timeout_s`` gives
UnitTimeout; a STOP or an ABORT while waiting raises StopRequested / AbortRequested; a HOLD while
waiting holds the run and its request (others are granted past it, its timeout pauses) until a
RESUME puts it back in its place. A retry or a fork that replays a grant whose block had not ended
holds its units again before the block goes on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exchange._arguments import shown
from exchange._engine import acquire_in_run, current_run, current_runtime, release_in_run
from exchange.errors import InvalidArgument, OutsideRunError, RunControl

__all__ = ["acquire"]

_CALL = "units.acquire"


@contextmanager
def acquire(*names: str, unit_class: str | None = None, timeout_s: float | None = None) -> Iterator[Any]:
    """Hold the units ``names`` (all of them) or, with ``unit_class``, the first free unit of that
    class, for the ``with`` block; gives the unit's name (one unit or a class) or the list of names.

    Every name must be a configured ``[units.NAME]`` and the class one that units have; give names or
    a class, not both. ``timeout_s``: None (wait as long as it takes) or a finite number > 0. A bad
    argument raises InvalidArgument before anything is asked; outside a run, OutsideRunError.
    """
    configured = current_runtime().config.units.units
    if unit_class is not None and names:
        raise InvalidArgument(f"{_CALL}: give unit names or unit_class, not both")
    if unit_class is not None:
        wanted = sorted(name for name, unit in configured.items() if unit.unit_class == unit_class)
        if not isinstance(unit_class, str) or not wanted:
            classes = sorted({unit.unit_class for unit in configured.values()})
            raise InvalidArgument(f"{_CALL}: unit_class must be a class of the configured units "
                                  f"({', '.join(classes) or 'none configured'}), got {shown(unit_class)}")
    else:
        if not names:
            raise InvalidArgument(f"{_CALL}: name at least one unit, or give unit_class")
        unknown = [name for name in names if not isinstance(name, str) or name not in configured]
        if unknown:
            raise InvalidArgument(f"{_CALL}: not a configured unit ([units.NAME]: "
                                  f"{', '.join(sorted(configured)) or 'none configured'}): "
                                  f"{', '.join(shown(n) for n in unknown)}")
        if len(set(names)) != len(names):
            raise InvalidArgument(f"{_CALL}: a unit is named twice: {', '.join(names)}")
        wanted = list(names)
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                  or not math.isfinite(timeout_s) or timeout_s <= 0):
        raise InvalidArgument(f"{_CALL}: timeout_s must be None or a finite number > 0, got {shown(timeout_s)}")
    ctx = current_run()
    if ctx is None:
        raise OutsideRunError(f"{_CALL} holds units for a run: call it inside a workflow")
    grant = acquire_in_run(ctx, wanted, unit_class is not None, unit_class, timeout_s)
    request_id, units = int(grant["request"]), list(grant["units"])
    try:
        yield units[0] if unit_class is not None or len(units) == 1 else units
    except RunControl:
        raise  # the run stops here (a cancel, a shutdown, a lost lease): its end, or its next execution, decides
    except BaseException as exc:
        release_in_run(ctx, request_id, f"the with block ended with {type(exc).__name__}")
        raise
    release_in_run(ctx, request_id, "the with block ended")
