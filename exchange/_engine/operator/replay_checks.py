"""Safe upgrades: replay the runs in flight against the workflow code loaded now, and a run's history
as a file (``exchange export-run``) to replay in a test.

:func:`check_replay` is ``Runtime.check_replay``, under ``exchange check-replay``: each run's history
is read from the store (the run row and its steps, two reads) and replayed by
:func:`~exchange._engine.execution.replay_check.replay_only`, which executes, waits for and writes
nothing. :func:`export_run` and :func:`history_from_export` are the two sides of the history file,
format :data:`FORMAT` version :data:`VERSION` (documented in docs/cli.md, "export-run"):

- ``format``, ``version``; ``run``, ``workflow``, ``params`` (the run's parameters), ``code_version``
  (of the code that started the run), ``status`` and ``state`` when exported, ``created_by``;
- ``steps``: every recorded step in order, ``{seq, name, status, attempts, output, error,
  idle_before}``: ``output`` the recorded JSON value, ``error`` ``{type, message, pickle}`` or null
  (``pickle``: the exception as the store keeps it, base64, so a replay raises the same class),
  ``idle_before`` the idle polls and short sleeps before the step (``skipped_ops``);
- ``tail``: the idle operations recorded after the last step, ``{after_seq, idle_ops, sleep_wake_at}``
  or null;
- ``patched``: the ``rt.patched`` decisions the run recorded, patch id to sequence number (the
  steps hold them as ``exchange.patched:ID``; listed for people, a replay reads the steps).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from exchange._config import EngineConfig
from exchange._engine.definition import Registry
from exchange._engine.execution import PATCH_STEP_PREFIX, History, ReplayOutcome, no_workflow, replay_only
from exchange._engine.operator import run_lookup
from exchange._store import RunRecord, StepRecord, Store, codec
from exchange._store import records as r
from exchange.errors import InvalidArgument, UnknownRun, UnknownWorkflow

log = logging.getLogger(__name__)

FORMAT = "exchange-run-history"
VERSION = 1
RUNS_MAX = 1_000_000  # --all-active: every unfinished run


def history_of(rec: RunRecord, steps: dict[int, StepRecord]) -> History:
    """The history a replay needs, from the run's row and its recorded steps."""
    return History(run_id=rec.id, workflow=rec.workflow, params=codec.loads(rec.params) or {},
                   code_version=rec.code_version, steps=steps, quiet_after_seq=rec.quiet_after_seq,
                   quiet_ops=rec.quiet_ops, quiet_wake_at=rec.quiet_wake_at, state=rec.state,
                   actor=rec.created_by)


def check_history(store: Store, registry: Registry, settings: EngineConfig, history: History) -> ReplayOutcome:
    """Replay one history against the workflow of its name in ``registry`` now."""
    try:
        definition = registry.get(history.workflow)
    except UnknownWorkflow:
        return no_workflow(history, registry.names())
    # What the workflow reads through getWorkflows() (getRun, ...) goes to the process's runtime, as
    # in a gateway: the CLI's is the one checking.
    return replay_only(store, settings, definition, history)


def selected_runs(store: Store, run_ids: Sequence[str], *, all_active: bool, since: Any) -> list[RunRecord]:
    """The runs to check: those named (whole ids; UnknownRun for one that names none), and with
    ``all_active`` (or no run named) every unfinished run; ``since`` keeps those created since then
    (a ``timedelta`` ago, a ``datetime``, epoch seconds)."""
    call = "check_replay"
    created_since = run_lookup.created_since(store, since, call)
    chosen: dict[str, RunRecord] = {}
    for run_id in run_ids:
        rec = store.runs.get(run_id)
        if rec is None:
            raise UnknownRun(run_id)
        chosen[rec.id] = rec
    if all_active or not run_ids:
        for status in r.UNFINISHED_STATUSES:
            where = run_lookup.run_filter(store, status=status, workflow=None, state=None, code_version=None,
                                          since=None, call=call)
            for rec in store.lookup.list(where, RUNS_MAX):
                chosen.setdefault(rec.id, rec)
    return sorted((rec for rec in chosen.values() if created_since is None or rec.created_at >= created_since),
                  key=lambda rec: (rec.created_at, rec.id))


def check_replay(store: Store, registry: Registry, settings: EngineConfig, run_ids: Sequence[str] = (), *,
                 all_active: bool = False, since: Any = None) -> list[ReplayOutcome]:
    """Replay each selected run's history (see :func:`selected_runs`) against the code in
    ``registry`` now, executing nothing; one outcome per run, oldest run first."""
    outcomes = []
    for rec in selected_runs(store, run_ids, all_active=all_active, since=since):
        outcome = check_history(store, registry, settings, history_of(rec, store.steps.load(rec.id)))
        if not outcome.ok:
            log.info("check-replay: run %s of %s %s: %s", rec.id, rec.workflow, outcome.status,
                     outcome.divergence.message if outcome.divergence else outcome.error)
        outcomes.append(outcome)
    return outcomes


# ----- the history file ---------------------------------------------------------------------------
def export_run(store: Store, run_id: str) -> dict[str, Any]:
    """The history of run ``run_id`` (a whole id) as the document of the module docstring (UnknownRun)."""
    rec = store.runs.get(run_id)
    if rec is None:
        raise UnknownRun(run_id)
    steps = store.steps.load(run_id)
    tail = None
    if rec.quiet_ops is not None:
        tail = {"after_seq": rec.quiet_after_seq, "idle_ops": rec.quiet_ops, "sleep_wake_at": rec.quiet_wake_at}
    return {
        "format": FORMAT, "version": VERSION, "run": rec.id, "workflow": rec.workflow,
        "params": codec.loads(rec.params) or {}, "code_version": rec.code_version, "status": rec.status,
        "state": rec.state, "created_by": rec.created_by, "tail": tail,
        "patched": {s.name[len(PATCH_STEP_PREFIX):]: s.seq for s in steps.values()
                    if s.name.startswith(PATCH_STEP_PREFIX)},
        "steps": [_step_entry(s) for s in steps.values()],
    }


def _step_entry(step: StepRecord) -> dict[str, Any]:
    error = None
    if step.error_type is not None or step.error_message is not None:
        blob = step.error_blob
        error = {"type": step.error_type, "message": step.error_message,
                 "pickle": None if blob is None else (blob.decode("ascii") if isinstance(blob, bytes) else str(blob))}
    return {"seq": step.seq, "name": step.name, "status": step.status, "attempts": step.attempts,
            "output": codec.loads(step.output), "error": error, "idle_before": step.skipped_ops}


def history_from_export(doc: Any, where: str = "the history") -> History:
    """The :class:`History` of an exported document; InvalidArgument naming ``where`` and the field
    when it is not one (or of a version this Exchange cannot read)."""
    def bad(what: str) -> InvalidArgument:
        return InvalidArgument(f"{where}: {what}")

    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad(f"not an exported run history (its 'format' must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise bad(f"history format version {doc.get('version')!r}; this Exchange reads version {VERSION}")
    for key, kind in (("run", str), ("workflow", str), ("code_version", str), ("params", dict), ("steps", list)):
        if not isinstance(doc.get(key), kind):
            raise bad(f"{key!r} must be a {kind.__name__}")
    steps: dict[int, StepRecord] = {}
    for index, entry in enumerate(doc["steps"]):
        try:
            seq, name, status = int(entry["seq"]), str(entry["name"]), str(entry["status"])
            error = entry.get("error") or {}
            blob = error.get("pickle")
            if blob is not None:
                base64.b64decode(blob, validate=True)  # ValueError unless base64
            steps[seq] = StepRecord(
                seq=seq, name=name, status=status,  # type: ignore[arg-type]  # the store's statuses, as exported
                attempts=int(entry.get("attempts", 1)),
                output=None if entry.get("output") is None else codec.dumps(entry["output"]),
                error_type=error.get("type"), error_message=error.get("message"),
                error_blob=None if blob is None else blob.encode("ascii"),
                skipped_ops=int(entry.get("idle_before", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise bad(f"steps[{index}] is not a recorded step: {exc}") from None
    tail = doc.get("tail") or {}
    if not isinstance(tail, dict):
        raise bad("'tail' must be an object or null")
    return History(run_id=doc["run"], workflow=doc["workflow"], params=doc["params"], code_version=doc["code_version"],
                   steps=steps, quiet_after_seq=tail.get("after_seq"), quiet_ops=tail.get("idle_ops"),
                   quiet_wake_at=tail.get("sleep_wake_at"), state=doc.get("state"),
                   actor=str(doc.get("created_by") or "exchange"))
