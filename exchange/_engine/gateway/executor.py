"""Executing one run on the current thread, from its first step or by replaying its history.

The execution holds the run under a :class:`~exchange._engine.execution.execution_lease.Lease`; every write it
makes carries the lease's fence. Its end is one of:

- a final status (SUCCESS, ERROR, CANCELLED), written with retries: a store that fails for a moment
  while the outcome is written does not turn SUCCESS into ERROR;
- :data:`SUSPENDED`: the gateway is stopping; the run stays with its owner and resumes on the next start;
- :data:`RETRY_LATER`: the store failed, or the execution lost its lease; the run is executed again by
  replay once the store answers, if it is still this owner's;
- :data:`NOT_OURS`: the run is not (or no longer) held under this fence.

A replay that meets a divergence from the recorded history (the code changed under the run) does
not end it: the run is held on its code (:mod:`~exchange._engine.execution.code_hold`) and waits here
for a RESUME, which executes it again from its history with the code loaded then, or a STOP.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass

from exchange._engine.definition import WorkflowDef
from exchange._engine.execution import Lease, RunContext, bind, code_hold, error_fields, storable_text, unbind
from exchange._engine.gateway.outage import RepeatedLog
from exchange._engine.operator import Runtime, bind_executing, unbind_executing
from exchange._store import codec
from exchange._store import records as r
from exchange.errors import (
    Cancelled,
    ExchangeError,
    OutputTooLarge,
    OwnershipLost,
    StepOutputError,
    StoreError,
    StoreLost,
    Suspended,
    WorkflowError,
)

log = logging.getLogger(__name__)
STORE_FAILED = RepeatedLog(log)

SUSPENDED = "SUSPENDED"
RETRY_LATER = "RETRY_LATER"
NOT_OURS = "NOT_OURS"

# Writing the final status: attempts and the first pause (doubling) before giving up to a replay.
FINISH_ATTEMPTS = 5
FINISH_FIRST_PAUSE_SECONDS = 0.1
TRACEBACK_MAX_CHARS = 4000


@dataclass(frozen=True)
class Ending:
    """How the workflow body ended, to be written as the run's final status."""

    status: r.RunStatus
    result_json: str | None = None
    error: tuple[str, str] | None = None
    traceback_text: str | None = None


# The body met a divergence from the history: the run is held on its code (code_hold), not ended.
DIVERGED = Ending(r.ERROR, error=(r.CODE_HELD_ERROR, "the history diverges from the code"))
# The hold on the code ended with RESUME: the run is executed again from its history.
RESUMED = Ending(r.RUNNING, error=None)


def execute_run(runtime: Runtime, lease: Lease, started: r.RunRecord | None = None) -> str:
    """Run the lease's run to its end on this thread; returns a final status or one of
    :data:`SUSPENDED`, :data:`RETRY_LATER`, :data:`NOT_OURS` (see the module docstring).

    ``started``: the run's record when the write that gave this process the run also started this
    execution (a claim); otherwise the execution's start is written here first."""
    run_id = lease.run_id
    try:
        return _execute(runtime, lease, started)
    except (StoreError, StoreLost) as exc:
        # Every run meets the same outage, again at each retry: the log says so once a minute.
        cause = exc.__cause__ if isinstance(exc, StoreLost) and exc.__cause__ is not None else exc
        STORE_FAILED.log("run %s: it waits for the store and will be executed again: %s", run_id, cause)
        return RETRY_LATER
    except OwnershipLost as exc:
        log.warning("run %s: execution stopped: %s", run_id, exc.why)
        return RETRY_LATER


def _execute(runtime: Runtime, lease: Lease, started: r.RunRecord | None) -> str:
    store = runtime.store
    fence = lease.fence
    rec = started
    if rec is None:
        sent_at = time.monotonic()
        rec = store.start_execution(fence, runtime.config.engine.lease_seconds)
        if rec is None:
            return NOT_OURS
        lease.renewed(sent_at)
    keyed = rec.partition_key is not None
    if rec.cancel_requested:
        return _finish(runtime, lease, Ending(r.CANCELLED, error=("Cancelled", rec.cancel_reason or "cancelled")),
                       keyed)
    try:
        definition = runtime.registry.get(rec.workflow)
    except WorkflowError as exc:
        return _finish(runtime, lease, Ending(r.ERROR, error=(type(exc).__name__, str(exc))), keyed)
    # A fork's first execution replays the steps copied from its origin; any other first one has none.
    has_history = rec.executions > 1 or rec.forked_from is not None
    if has_history and rec.code_version != definition.code_version:
        log.warning("run %s of %s resumes under a different code version (%s, recorded %s)",
                    fence.run_id, rec.workflow, definition.code_version, rec.code_version)
        store.events.add_fenced(fence, "code_version", {"recorded": rec.code_version, "now": definition.code_version})
    # Held because its history diverged from its code (code_hold): checked again before it waits.
    held = code_hold.last_hold(store, rec) if code_hold.is_held_on_code(rec) else None
    ever_held = False
    while True:
        ctx = _context(runtime, lease, rec, definition, has_history)
        if held is not None:  # replayed again executing nothing: logged again, its detail brought up to date
            held = code_hold.held_again(ctx, held, code_hold.recheck(store, ctx, definition, rec))
        runtime.local_runs.attach(ctx)
        token = bind(ctx)
        runtime_token = bind_executing(runtime)
        try:
            ending = _body_or_hold(ctx, definition, rec.params, held)
        finally:
            unbind_executing(runtime_token)
            unbind(token)
            runtime.local_runs.detach(fence.run_id)
        ever_held = ever_held or held is not None or ctx.divergence is not None
        if ending is not RESUMED:
            break
        # RESUME: the run is replayed again from its history, with the code loaded now.
        found = store.runs.get(fence.run_id)
        if found is None:
            return NOT_OURS
        rec, held = found, None
        try:
            definition = runtime.registry.get(rec.workflow)
        except WorkflowError as exc:
            return _finish(runtime, lease, Ending(r.ERROR, error=(type(exc).__name__, str(exc))), keyed)
    if ending is None:
        log.info("run %s suspended for shutdown", fence.run_id)
        return SUSPENDED
    # A run held on its code may hold units its replay had not reached: its end releases them.
    return _finish(runtime, lease, ending, keyed, used_units=ctx.used_units or ever_held)


def _body_or_hold(ctx: RunContext, definition: WorkflowDef, params_json: str, held: code_hold.CodeHold | None
                  ) -> Ending | None:
    """The workflow body's ending; or, when it diverged from the history (however the body ended
    after that, but for a cancel), or the run is ``held`` on its code already, the ending of the hold
    (:func:`_held_on_code`)."""
    if held is None:
        ending = _run_body(ctx, definition, params_json)
        if ending is None or ctx.divergence is None or ending.status == r.CANCELLED:
            return ending
        held = code_hold.hold(ctx, code_hold.from_error(ctx.divergence, ctx.store.clock.now()))
    return _held_on_code(ctx, held)


def _context(runtime: Runtime, lease: Lease, rec: r.RunRecord, definition: WorkflowDef, has_history: bool
             ) -> RunContext:
    store = runtime.store
    return RunContext(
        store=store,
        settings=runtime.config.engine,
        lease=lease,
        run_id=rec.id,
        workflow=rec.workflow,
        actor=rec.created_by,
        # The first execution has no history: steps are written only by an execution, after its start.
        recorded=store.steps.load(rec.id) if has_history else {},
        deadline_at=rec.deadline_at,
        on_step_error=definition.on_step_error,
        quiet_after_seq=rec.quiet_after_seq,
        quiet_ops=rec.quiet_ops,
        quiet_wake_at=rec.quiet_wake_at,
        state=rec.state,
        state_written=rec.state,
        mail_watched=runtime.mail_watched,
    )


def _held_on_code(ctx: RunContext, held: code_hold.CodeHold) -> Ending | None:
    """Wait in the hold for a command: :data:`RESUMED`, the run's end (STOP, ABORT: ERROR; a cancel),
    or None when the gateway's shutdown suspended the run."""
    try:
        command = code_hold.await_command(ctx, held)
    except Suspended:
        return None
    except Cancelled as exc:
        return Ending(r.CANCELLED, error=("Cancelled", storable_text(exc.reason or "cancelled")))
    if command == code_hold.RESUMED:
        return RESUMED
    log.info("run %s of %s ends ERROR: %s while held on its code", ctx.run_id, ctx.workflow, command)
    return Ending(r.ERROR, error=(r.CODE_HELD_ERROR, f"{command} while held on its code: {held.detail}"))


def _run_body(ctx: RunContext, definition: WorkflowDef, params_json: str) -> Ending | None:
    """Call the workflow function; None when the gateway's shutdown suspended it. StoreLost and
    OwnershipLost pass through: the run must not be finished by this execution. A run that was
    cancelled ends CANCELLED however its body ended (a body that catches Cancelled to clean up and
    then returns has still been cancelled)."""
    ending = _body_ending(ctx, definition, params_json)
    if ending is not None and ending.status != r.CANCELLED and ctx.cancel_requested:
        log.info("run %s of %s was cancelled; its body ended %s on the way out", ctx.run_id, definition.name,
                 ending.status)
        return Ending(r.CANCELLED, error=("Cancelled", storable_text(ctx.cancel_reason or "cancelled")))
    return ending


def _body_ending(ctx: RunContext, definition: WorkflowDef, params_json: str) -> Ending | None:
    try:
        result = definition.fn(**codec.loads(params_json))
        ctx.flush_progress()
        try:
            result_json = codec.dumps(result)
        except codec.NotJSON as exc:
            raise StepOutputError(f"workflow {definition.name!r} returned a value that is not JSON: {exc}") from None
        size, limit = len(result_json.encode("utf-8")), ctx.settings.result_max_bytes
        if size > limit:  # the run fails instead of storing it
            raise OutputTooLarge(f"workflow {definition.name!r} returned a result of {size} bytes as JSON; the "
                                 f"limit is {limit} (engine.result_max_bytes); nothing was stored")
        return Ending(r.SUCCESS, result_json=result_json)
    except Suspended:
        return None
    except Cancelled as exc:
        _flush_quietly(ctx)
        return Ending(r.CANCELLED, error=("Cancelled", storable_text(exc.reason or "cancelled")))
    except Exception as exc:
        if ctx.divergence is not None:  # held on its code, not failed (code_hold)
            return DIVERGED
        _flush_quietly(ctx)
        error_type, message = error_fields(exc)
        name = exc.__class__.__name__ if isinstance(exc, ExchangeError) else error_type
        log.info("run %s of %s failed: %s: %s", ctx.run_id, definition.name, name, message)
        text = "".join(traceback.format_exception(exc))[-TRACEBACK_MAX_CHARS:]
        return Ending(r.ERROR, error=(name, message), traceback_text=storable_text(text))


def _finish(runtime: Runtime, lease: Lease, ending: Ending, keyed: bool, *, used_units: bool = True) -> str:
    """Write the final status, retrying while the store fails; StoreLost when it keeps failing (the
    run is then replayed, reaching the same outcome from its record). ``keyed``: the run has a
    partition key, whose next run other gateways may now claim (they are told so)."""
    pause = FINISH_FIRST_PAUSE_SECONDS
    for attempt in range(1, FINISH_ATTEMPTS + 1):
        try:
            done = runtime.store.finish_run(
                lease.fence, ending.status, result_json=ending.result_json, error=ending.error,
                traceback_text=ending.traceback_text, frees_partition=keyed,
            )
        except StoreError as exc:
            if attempt == FINISH_ATTEMPTS:
                raise StoreLost(lease.run_id, exc) from exc
            STORE_FAILED.log("run %s: writing its end (%s) failed, trying again: %s", lease.run_id,
                                 ending.status, exc)
            time.sleep(pause)
            pause *= 2
            continue
        if not done:
            raise OwnershipLost(lease.run_id, "its end was refused: another execution holds the run")
        runtime.finished_here(lease.run_id)
        if used_units:  # its units go to the runs waiting for them now (a later pass would free them anyway)
            try:
                runtime.store.units.release_run(lease.run_id, f"the run ended {ending.status}")
            except Exception:  # noqa: BLE001 - the run's end is recorded; the next pass frees its units
                log.exception("run %s: releasing its units failed", lease.run_id)
        if ending.status == r.CANCELLED:  # its timeout, or a cancel: its children go too
            try:
                runtime.cancel_children(lease.run_id, ending.error[1] if ending.error else None,
                                        actor=f"run:{lease.run_id}")
            except Exception:  # the parent's end is recorded; a child left running is not worth failing it
                log.exception("run %s: cancelling its children failed", lease.run_id)
        return ending.status
    raise AssertionError("unreachable")  # pragma: no cover


def _flush_quietly(ctx: RunContext) -> None:
    try:
        ctx.flush_progress()
    except Exception:  # the run's outcome matters more than its last progress line
        log.exception("run %s: writing the last progress failed", ctx.run_id)


__all__ = ["NOT_OURS", "RETRY_LATER", "SUSPENDED", "execute_run"]
