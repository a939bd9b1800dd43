"""The shapes of the run as users see it (``getRun``, ``waitFor``, ``exchange show RUN --json``, the
HTTP API's run objects), as TypedDicts: mypy checks every place that builds or reads one, while at
run time they stay plain dicts, so their JSON is unchanged.

Times are ISO 8601 UTC text (None when not reached yet); ``params``, ``result``, outputs and
payloads are whatever JSON the run stored. :func:`exchange._engine.operator.views.run_view` builds them.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ErrorView(TypedDict):
    """A run's or a step's error: the exception's class name and its message."""

    type: str
    message: str | None


class ProgressView(TypedDict):
    """The latest progress report (``rt.progress(message, extra)``)."""

    message: str
    extra: Any


class ChildView(TypedDict):
    """A run this run started as its child."""

    id: str
    workflow: str
    status: str


class HeldOnView(TypedDict):
    """The step an unfinished run is held on: after its failure (``on_step_error="hold"``, ``cause``
    ``"step"``), or where its recorded history diverges from the code loaded now (``cause``
    ``"code"``: ``step`` the recorded step there, ``attempts`` 0, ``error`` the divergence)."""

    seq: int | None
    step: str | None
    attempts: int
    error: dict[str, str | None]  # ``{"type", "message"}`` as the step recorded them
    in_doubt: bool
    since: str | None
    cause: str  # "step" or "code"


class PromptView(TypedDict):
    """An operator prompt (``show --json``'s ``prompt``, ``exchange prompts --json``)."""

    run: str
    key: str
    text: str
    fields: dict[str, Any]
    role: str
    verify_role: str | None
    status: str
    seq: int
    opened_at: str | None
    deadline_at: str | None
    answered_by: str | None
    answered_at: str | None
    values: dict[str, Any] | None
    reason: str | None
    verified_by: str | None


class PhaseView(TypedDict):
    """The equipment phase a run commands now (``phase.run``), as the run last saw it: ``stage`` is
    ``ready``, ``starting``, ``running`` or ``resetting``; ``state`` the PLC's state name the run saw
    last (None before it read one); ``held_by`` ``operator``, ``equipment`` or None; ``since`` when
    Start was sent (before that: when the step began)."""

    name: str
    stage: str | None
    state: str | None
    held_by: str | None
    since: str | None


class PhaseRunView(TypedDict):
    """The run commanding a phase now (``Runtime.phase_runs``): its id and workflow, how far its
    ``phase.run`` has got (``stage``), the PLC state it saw last and who holds the phase."""

    run: str
    workflow: str
    stage: str | None
    seen_state: str | None
    held_by: str | None


class RunUnitsView(TypedDict):
    """The units a run holds now and those it waits for (``units.acquire``), by name; a request for
    a class waits for every unit of the class. Both empty for a finished run."""

    held: list[str]
    waiting_for: list[str]


class StepView(TypedDict):
    """A recorded step of a run."""

    seq: int
    name: str
    status: str
    attempts: int
    output: Any
    error: ErrorView | None
    next_attempt_at: str | None
    started_at: str | None
    finished_at: str | None


class EventView(TypedDict):
    """An event of a run's history (commands, progress, tag writes, ...)."""

    id: int
    kind: str
    at: str | None
    actor: str | None
    reason: str | None
    step_seq: int | None
    payload: Any


class _RunKeys(TypedDict):
    """The keys every run view has (``runs``, ``listRuns``)."""

    id: str
    workflow: str
    status: str
    state: str | None
    progress: ProgressView | None
    params: Any
    result: Any
    error: ErrorView | None
    queue: str
    partition_key: str | None
    priority: int
    deduplication_id: str | None
    timeout_seconds: float | None
    code_version: str
    owner: str | None
    owner_node: str | None
    owner_alive: bool | None
    lease_expires_at: str | None
    created_by: str
    cancel_requested: bool
    executions: int
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    updated_at: str | None
    parent_run_id: str | None
    forked_from: str | None


class RunView(_RunKeys, total=False):
    """A run: the keys of every view, and those the detailed view (``getRun``, ``waitFor``,
    ``show``) adds: ``children``, ``prompt``, ``held_on``, ``phase``, ``units`` and
    ``steps``/``events``; asking for the last N steps or events adds their totals and
    ``events_in_doubt``. (Two classes rather than
    ``NotRequired``: with postponed annotations only ``total=False`` tells the optional keys
    apart at run time too.)"""

    children: list[ChildView]
    prompt: PromptView | None
    held_on: HeldOnView | None
    phase: PhaseView | None
    units: RunUnitsView
    steps: list[StepView]
    steps_total: int
    events: list[EventView]
    events_total: int
    events_in_doubt: list[EventView]
