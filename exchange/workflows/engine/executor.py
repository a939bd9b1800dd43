"""Executing one run on the current thread, from its first step or by replaying its history."""

from __future__ import annotations

import logging
import traceback

from exchange.errors import Cancelled, ExchangeError, StepOutputError, StoreError, WorkflowError
from exchange.workflows.engine import replay
from exchange.workflows.engine.context import RunContext, StoreLost, Suspended, bind, unbind
from exchange.workflows.engine.runtime import Runtime
from exchange.workflows.store import codec
from exchange.workflows.store import records as r

log = logging.getLogger(__name__)


RETRY_LATER = "RETRY_LATER"


def execute_run(runtime: Runtime, run_id: str, owner: str) -> str | None:
    """Run ``run_id`` to its end on this thread if ``owner`` holds it; returns the final status.

    Returns None when the run is not (or no longer) this owner's, or when a gateway shutdown
    suspended it (it stays PENDING/RUNNING under its owner and resumes on the next start), and
    :data:`RETRY_LATER` when the store failed: the run stays with its owner, to be executed again by
    replay once the store answers.
    """
    try:
        return _execute(runtime, run_id, owner)
    except (StoreError, StoreLost) as exc:
        log.warning("run %s: the store failed (%s); it will be executed again", run_id, exc)
        return RETRY_LATER


def _execute(runtime: Runtime, run_id: str, owner: str) -> str | None:
    store = runtime.store
    rec = store.start_execution(run_id, owner)
    if rec is None:
        return None
    if rec.cancel_requested:
        store.finish_run(run_id, r.CANCELLED, owner=owner, error=("Cancelled", rec.cancel_reason or "cancelled"))
        return r.CANCELLED
    try:
        definition = runtime.registry.get(rec.workflow)
    except WorkflowError as exc:
        store.finish_run(run_id, r.ERROR, owner=owner, error=(type(exc).__name__, str(exc)))
        return r.ERROR
    if rec.executions > 1 and rec.code_version != definition.code_version:
        log.warning("run %s of %s resumes under a different code version (%s, recorded %s)",
                    run_id, rec.workflow, definition.code_version, rec.code_version)
        store.events.add(run_id, "code_version", {"recorded": rec.code_version, "now": definition.code_version})
    ctx = RunContext(
        runtime=runtime,
        run_id=run_id,
        workflow=rec.workflow,
        actor=rec.created_by,
        recorded=store.steps.load(run_id),
        deadline_at=rec.deadline_at,
        quiet_after_seq=rec.quiet_after_seq,
        quiet_ops=rec.quiet_ops,
        quiet_wake_at=rec.quiet_wake_at,
        state=rec.state,
    )
    runtime.attach(ctx)
    token = bind(ctx)
    try:
        result = definition.fn(**codec.loads(rec.params))
        ctx.flush_progress()
        try:
            result_json = codec.dumps(result)
        except codec.NotJSON as exc:
            raise StepOutputError(f"workflow {rec.workflow!r} returned a value that is not JSON: {exc}") from None
        store.finish_run(run_id, r.SUCCESS, owner=owner, result_json=result_json)
        return r.SUCCESS
    except Suspended:
        log.info("run %s suspended for shutdown", run_id)
        return None
    except StoreLost:
        raise
    except Cancelled as exc:
        _flush_quietly(ctx)
        store.finish_run(run_id, r.CANCELLED, owner=owner, error=("Cancelled", exc.reason or "cancelled"))
        return r.CANCELLED
    except Exception as exc:
        _flush_quietly(ctx)
        name = exc.__class__.__name__ if isinstance(exc, ExchangeError) else replay.error_type_name(exc)
        log.info("run %s of %s failed: %s: %s", run_id, rec.workflow, name, exc)
        store.finish_run(
            run_id, r.ERROR, owner=owner, error=(name, str(exc)),
            traceback_text="".join(traceback.format_exception(exc))[-4000:],
        )
        return r.ERROR
    finally:
        unbind(token)
        runtime.detach(run_id)


def _flush_quietly(ctx: RunContext) -> None:
    try:
        ctx.flush_progress()
    except Exception:  # the run's outcome matters more than its last progress line
        log.exception("run %s: writing the last progress failed", ctx.run_id)
