"""Child workflows: ``rt.startChild(name, params, **options)`` and ``rt.waitFor(run_id, timeout)``
inside a run.

``startChild`` is a recorded step (``exchange.startChild``) whose answer is the child's id. The
child is created with a deduplication id derived from the parent and the step's position (unless
the caller gives one), so a parent that dies between creating the child and recording the step
gets the same child back on replay: never a second one. The child records its parent
(``parent_run_id``); cancelling a parent cancels its unfinished children (and theirs).

``waitFor`` inside a run is a recorded step (``exchange.waitFor``) too: it waits, noticing a cancel
at once, until the child finished or the timeout passed, and records the run dict it saw, so a
replay answers the same without waiting; a parent whose gateway died while waiting waits again
after the takeover (the child went on meanwhile).
"""

from __future__ import annotations

import time
from typing import Any, cast

from exchange._engine.execution import RunContext, replay_or_record, waitpoints
from exchange._engine.model import RunView
from exchange._engine.operator import Runtime, StartKeywords
from exchange._store import FINAL_STATUSES

START_STEP = "exchange.startChild"
WAIT_STEP = "exchange.waitFor"
WAIT_POLL_SECONDS = 0.25  # a parent looks at its child this often (one indexed read)


def start_child(ctx: RunContext, runtime: Runtime, name: str, params: dict[str, Any] | None,
                options: StartKeywords) -> str:
    """The child's id: recorded, or created now (see the module docstring)."""
    ctx.require_workflow_body("startChild")
    return str(replay_or_record(ctx, START_STEP, _start, ctx, runtime, name, params, options))


def _start(ctx: RunContext, runtime: Runtime, name: str, params: dict[str, Any] | None,
           options: StartKeywords) -> str:
    ctx.make_answers_durable()  # what the run received before decides this child: durable first
    ctx.lease.await_valid()
    keywords = options.copy()
    keywords.setdefault("deduplicationId", f"{ctx.run_id}/child/{ctx.next_seq}")
    keywords.setdefault("actor", f"run:{ctx.run_id}")
    return runtime.start(name, params, parent_run_id=ctx.run_id, **keywords)


def wait_for(ctx: RunContext, runtime: Runtime, run_id: str, timeout_seconds: float | None) -> RunView:
    """The run dict of ``run_id`` once it finished, or as it was when the timeout passed; recorded
    (a replay gives back the run view the step stored as JSON, of the same shape)."""
    ctx.require_workflow_body("waitFor")
    view = replay_or_record(ctx, WAIT_STEP, _wait, ctx, runtime, run_id, timeout_seconds)
    return cast(RunView, dict(view))


def _wait(ctx: RunContext, runtime: Runtime, run_id: str, timeout_seconds: float | None) -> RunView:
    ctx.flush_progress_if_due(float("inf") if timeout_seconds is None else timeout_seconds)
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    what = f"child:{run_id}"
    while True:
        waitpoints.reached(waitpoints.READ, ctx.run_id, what)
        view = runtime.get_run(run_id, steps=False, events=False)
        remaining = None if deadline is None else deadline - time.monotonic()
        if view["status"] in FINAL_STATUSES or (remaining is not None and remaining <= 0):
            return view
        waitpoints.reached(waitpoints.SLEEP, ctx.run_id, what)
        ctx.sleep(WAIT_POLL_SECONDS if remaining is None else min(WAIT_POLL_SECONDS, remaining))
