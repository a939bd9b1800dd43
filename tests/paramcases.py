"""The cases of the one parameter check (issue 25, item 2), shared by the tests of every entry that
starts a run: Python ``start`` and ``startChild``, ``exchange run``/``start``, ``POST /api/v1/runs``,
the console's start form, templates saved and started, schedules and triggers at gateway start.

:data:`APP` is the workflow module each of them loads (written into an apps folder, imported by a
gateway, a command or the test process); :data:`REFUSED` the parameters each entry must refuse
with an error naming the parameter (and nothing stored), :data:`ACCEPTED` the ones it must take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

VALVE = "params.valve"
PARENT = "params.parent"

APP = '''
from typing import Literal, Optional

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows


@workflow(name="params.valve", description="opens the inlet for x seconds, then doubles it")
def valve(x: float, mode: Literal["auto", "manual"] = "auto", count: int = 1, flush: bool = False,
          trim: Optional[float] = None, limits: dict[str, float] | None = None, scheduled_at: str = "",
          trigger_at: str = "", trigger_value=None):
    return {"x": x, "x_type": type(x).__name__, "doubled": x * 2.0, "mode": mode, "count": count,
            "flush": flush, "trim": trim}


@workflow(name="params.parent")
def parent(child: dict):
    return getWorkflows().startChild("params.valve", child)
'''


@dataclass(frozen=True)
class Case:
    """Parameters an entry must refuse: ``params`` as JSON, ``cli`` as ``-p`` items, ``named``: the
    words the error must hold (the parameter, the expected type, the value given)."""

    id: str
    params: dict[str, Any]
    cli: tuple[str, ...]
    named: str


REFUSED = [
    Case("float given text", {"x": "ten"}, ("x=ten",), '''parameter 'x' expects float, got "ten" (str)'''),
    Case("float given a number as text", {"x": "10"}, ('x="10"',), '''parameter 'x' expects float, got "10" (str)'''),
    Case("float given a list", {"x": [1]}, ("x=[1]",), "parameter 'x' expects float, got [1] (list)"),
    Case("literal given another word", {"x": 1.5, "mode": "turbo"}, ("x=1.5", "mode=turbo"),
         '''parameter 'mode' expects one of "auto", "manual", got "turbo" (str)'''),
    Case("int given text", {"x": 1.5, "count": "seven"}, ("x=1.5", "count=seven"),
         '''parameter 'count' expects int, got "seven" (str)'''),
    Case("int given a fraction", {"x": 1.5, "count": 3.5}, ("x=1.5", "count=3.5"),
         "parameter 'count' expects int, got 3.5 (float)"),
    Case("int given a bool", {"x": 1.5, "count": True}, ("x=1.5", "count=true"),
         "parameter 'count' expects int, got true (bool)"),
    Case("int of 400 digits", {"x": 1.5, "count": 10**399}, ("x=1.5", "count=1" + "0" * 399),
         "parameter 'count' expects int, a 64-bit integer (-9223372036854775808 to 9223372036854775807), got an "
         "integer of about 400 digits"),
    Case("int one past 64 bits", {"x": 1.5, "count": 2**63}, ("x=1.5", f"count={2**63}"),
         f"parameter 'count' expects int, a 64-bit integer (-9223372036854775808 to 9223372036854775807), got {2**63}"),
    Case("float given an integer no float holds", {"x": 10**400}, ("x=1" + "0" * 400,),
         "parameter 'x' expects float, a number a float can hold"),
    Case("bool given 1", {"x": 1.5, "flush": 1}, ("x=1.5", "flush=1"), "parameter 'flush' expects bool, got 1 (int)"),
    Case("bool given text", {"x": 1.5, "flush": "true"}, ("x=1.5", 'flush="true"'),
         '''parameter 'flush' expects bool, got "true" (str)'''),
    Case("unknown name", {"x": 1.5, "tirm": 0.5}, ("x=1.5", "tirm=0.5"),
         "parameter 'tirm' is unknown; did you mean 'trim'? (the workflow takes x, mode, count,"),
    Case("missing required", {"count": 2}, ("count=2",), "parameter 'x' (float) is required and was not given"),
]

# (id, params, -p items, what the run gets as x)
ACCEPTED = [
    ("float given an int, passed on as given", {"x": 10}, ("x=10",), 10),
    ("optional float given null", {"x": 1.5, "trim": None}, ("x=1.5", "trim=null"), 1.5),
]


def refused_cases() -> list[Any]:
    return [pytest.param(case, id=case.id) for case in REFUSED]
