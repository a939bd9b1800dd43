"""Workflows and runs: ``/api/v1/workflows`` and ``/api/v1/runs...``, as in the CLI (same runtime calls)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field, field_validator

from exchange._api.bodies import Body
from exchange._api.identity import caller, needs, require
from exchange._api.signing import SignatureBody, signing_of
from exchange._auth.accounts import Identity
from exchange._auth.roles import CANCEL, COMMAND, READ, START, START_FREE
from exchange._engine import Runtime, Templates
from exchange._store import ALL_STATUSES
from exchange.errors import InvalidParams

router = APIRouter(prefix="/api/v1", tags=["runs"])

LIST_LIMIT_MAX = 1000
# start options as the API spells them (snake_case) -> as the runtime takes them
START_OPTIONS = {
    "queue": "queue",
    "partition_key": "partitionKey",
    "deduplication_id": "deduplicationId",
    "priority": "priority",
    "timeout_seconds": "timeoutSeconds",
}

# What the `start` right may set on a run from a template: which unit it runs for (a partition key,
# e.g. the line) and an id that makes a second click start nothing. Priority, queue and timeout decide
# what runs before what, where and for how long: for `start_free` (an engineer's right) to set (in the
# template's workflow, a schedule, or a start of their own), as `start` cannot start free parameters either.
OPERATOR_TEMPLATE_OPTIONS = ("partition_key", "deduplication_id")

# Each route asks for a right (exchange._roles.RIGHTS), never a role: a plant's own roles pass as theirs allow.
Caller = Annotated[Identity, Depends(caller)]  # any credential: the route checks the right it needs itself
Viewer = Annotated[Identity, Depends(needs(READ))]
Commander = Annotated[Identity, Depends(needs(COMMAND))]
Canceller = Annotated[Identity, Depends(needs(CANCEL))]


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


class StartOptions(Body):
    """``options`` of ``POST /runs``: :data:`START_OPTIONS` (the caller is the actor). Their lengths
    and ranges are the runtime's to check."""

    queue: str | None = None
    partition_key: str | None = None
    deduplication_id: str | None = None
    priority: int | None = None
    timeout_seconds: float | None = None

    @field_validator("partition_key", mode="before")
    @classmethod
    def _line_number(cls, value: Any) -> Any:
        """A whole number is taken as its text (a line number as a partition key), as by ``start``."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class StartRun(Body):
    workflow: str | None = Field(default=None, max_length=200)
    template: str | None = Field(default=None, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)  # checked against the workflow by the runtime
    options: StartOptions = Field(default_factory=StartOptions)


class Command(Body):
    cmd: str = Field(max_length=40)
    reason: str | None = None
    strict: bool = False
    args: Any = None  # any JSON value, delivered with the command (``recvCommand(...)["args"]``)
    signature: SignatureBody | None = None  # needed when [signatures] required_for lists the command


class Cancel(Body):
    reason: str | None = None
    signature: SignatureBody | None = None  # needed when [signatures] required_for lists cancel


@router.get("/workflows")
def list_workflows(request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """The workflows this gateway serves: name, module, parameters (names, and ``inputs``: each one
    as the parameter check enforces it: type, nullable, choices, items/values, required, default;
    and ``kind``, the console form's input), description, code version."""
    return [
        {"name": d.name, "module": d.module, "parameters": d.parameters(), "description": d.description,
         "code_version": d.code_version, "inputs": [spec.as_dict() for spec in d.signature.specs]}
        for d in runtime_of(request).registry.all()
    ]


@router.get("/runs")
def list_runs(
    request: Request,
    _who: Viewer,
    status: Annotated[str | None, Query(max_length=16)] = None,
    workflow: Annotated[str | None, Query(max_length=200)] = None,
    state: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=0, le=LIST_LIMIT_MAX)] = 50,
) -> list[dict[str, Any]]:
    """Runs, newest first; the filters combine (``status`` any case)."""
    if status is not None and status.strip().upper() not in ALL_STATUSES:
        raise InvalidParams(f"status {status!r} is not a run status ({', '.join(ALL_STATUSES)})")
    views = runtime_of(request).list_runs(
        status=None if status is None else status.strip().upper(), workflow=workflow or None,
        state=state or None, limit=limit,
    )
    return [dict(view) for view in views]  # plain dicts: FastAPI builds no model of a TypedDict


def start_options(given: StartOptions) -> dict[str, Any]:
    """The options given (null: the default) as the runtime takes them."""
    return {START_OPTIONS[key]: value for key, value in given.model_dump(exclude_none=True).items()}


@router.post("/runs", status_code=201)
def start_run(body: StartRun, request: Request, who: Caller) -> dict[str, Any]:
    """Start a run: of ``workflow`` with ``params`` (the ``start_free`` right: engineers), or from
    the active version of the parameter ``template`` (the ``start`` right: operators). ``options``:
    queue, partition_key, deduplication_id, priority, timeout_seconds; on a run from a template
    ``start`` alone may give only :data:`OPERATOR_TEMPLATE_OPTIONS` (403 naming any other). The
    caller is the run's ``created_by``."""
    if (body.workflow is None) == (body.template is None):
        raise InvalidParams("give either workflow (with params) or template, not both or neither")
    options = start_options(body.options)
    runtime = runtime_of(request)
    if body.template is not None:
        require(who, START, "starting a run from a parameter template")
        if body.params:
            raise InvalidParams("params: a run from a template takes the template's parameters")
        for key in body.options.model_dump(exclude_none=True):
            if key not in OPERATOR_TEMPLATE_OPTIONS:
                require(who, START_FREE, f"options.{key} on a run from a template (the right 'start' may set "
                                         f"{' and '.join(OPERATOR_TEMPLATE_OPTIONS)})")
        return {"id": Templates(runtime).start(body.template, actor=who.actor, **options)}
    require(who, START_FREE, "starting a workflow with parameters (the right 'start' starts from a parameter "
                             "template)")
    assert body.workflow is not None
    return {"id": runtime.start(body.workflow, body.params, actor=who.actor, **options)}


@router.get("/runs/{run_id}")
def get_run(
    run_id: str,
    request: Request,
    _who: Viewer,
    steps: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
    events: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
) -> dict[str, Any]:
    """The run as ``exchange show --json`` prints it (``steps``/``events``: only the last N)."""
    return dict(runtime_of(request).get_run(run_id, last_steps=steps, last_events=events))  # as list_runs


@router.post("/runs/{run_id}/commands", status_code=202)
def send_command(run_id: str, body: Command, request: Request, who: Commander) -> JSONResponse:
    """Post HOLD, RESUME, STOP, ABORT or RESET to the run's mailbox with the caller as actor, the reason
    and ``args`` (any JSON value, handed to the run with the command). The answer says what the run
    will likely do with it (``warning`` when its state will drop it); with ``strict`` such a command
    is refused (409) and not sent."""
    runtime = runtime_of(request)
    signing = signing_of(request, who, body.signature, body.cmd.strip().upper())
    warning = None if body.strict else runtime.judge_command(run_id, body.cmd)
    message_id = runtime.send_command(run_id, body.cmd, body.reason, actor=who.actor, args=body.args,
                                      strict=body.strict, signing=signing)
    return JSONResponse({"message_id": message_id, "warning": warning}, status_code=202)


@router.post("/runs/{run_id}/cancel", status_code=202)
def cancel_run(run_id: str, request: Request, who: Canceller, body: Cancel | None = None) -> JSONResponse:
    """Ask the run to stop (the ``cancel`` right: engineers and admins); ``status`` is the run's
    status at that moment."""
    signing = signing_of(request, who, body.signature if body else None, "cancel")
    status = runtime_of(request).cancel(run_id, body.reason if body else None, actor=who.actor, signing=signing)
    return JSONResponse({"status": status}, status_code=202)
