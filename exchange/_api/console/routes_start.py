"""The start page: operators start runs from parameter templates (recipes); engineers fill in a form
generated from a workflow's signature, start it, or save the values as a new template version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console.pages import read_form, reader, redirect, render, require, signed_in
from exchange._api.routes_runs import runtime_of
from exchange._auth.roles import EDIT_TEMPLATES, START, START_FREE
from exchange._engine import Templates, WorkflowDef, params_from_form
from exchange.errors import ExchangeError, UnknownTemplate, UnknownWorkflow

router = APIRouter(include_in_schema=False)

OPTION_FIELDS = (("queue", "queue"), ("partition_key", "partitionKey"))


@router.get("/start", response_class=HTMLResponse)
def start_page(request: Request) -> HTMLResponse:
    me = signed_in(request)
    if not me.may(START_FREE):  # the page holds the templates (start) and the workflows (start_free)
        require(me, START, "starting runs")
    runtime = runtime_of(request)
    return render(request, "start.html", me, templates=Templates(runtime).all(),
                  workflows=sorted(runtime.registry.all(), key=lambda d: d.name))


@router.post("/start/template")
async def start_from_template(request: Request) -> Response:
    me = signed_in(request)
    require(me, START, "starting a run from a template")
    form = await read_form(request, me)
    name = form.get("template", "")
    try:
        run_id = await run_in_threadpool(Templates(runtime_of(request)).start, name, actor=me.actor)
    except ExchangeError as exc:
        return redirect(request, "/start", me, problem=f"{name}: not started: {exc}")
    return redirect(request, f"/runs/{run_id}", me, notice=f"started from template {name}")


def _definition(request: Request, workflow: str) -> WorkflowDef | None:
    try:
        return runtime_of(request).registry.get(workflow)
    except UnknownWorkflow:
        return None


def _form_page(request: Request, me: Any, definition: WorkflowDef, status: int = 200,
               values: dict[str, str] | None = None, problem_here: str | None = None) -> HTMLResponse:
    return render(request, "start_form.html", me, status, definition=definition,
                  specs=list(definition.signature.specs), values=values or {}, problem_here=problem_here,
                  option_fields=[field for field, _ in OPTION_FIELDS])


@router.get("/start/{workflow}", response_class=HTMLResponse)
def workflow_form(request: Request, workflow: str) -> HTMLResponse:
    me = signed_in(request)
    require(me, START_FREE, "starting a workflow with parameters")
    definition = _definition(request, workflow)
    if definition is None:
        return render(request, "error.html", me, 404, message=f"no workflow named {workflow!r} on this gateway")
    return _form_page(request, me, definition)


@router.post("/start/{workflow}", response_class=HTMLResponse)
async def start_workflow(request: Request, workflow: str) -> Response:
    """Start the workflow with the form's values, or save them as a template version (the button
    pressed says which). A wrong value shows the form again, as typed, with the problem."""
    me = signed_in(request)
    require(me, START_FREE, "starting a workflow with parameters")
    form = await read_form(request, me)
    definition = _definition(request, workflow)
    if definition is None:
        return render(request, "error.html", me, 404, message=f"no workflow named {workflow!r} on this gateway")
    runtime = runtime_of(request)
    try:
        params = params_from_form(definition.signature.specs, form)
        if form.get("action") == "save":
            require(me, EDIT_TEMPLATES, "saving a recipe")
            name = form.get("template_name", "").strip()
            version = await run_in_threadpool(Templates(runtime).save, name, definition.name, params, actor=me.actor,
                                              note=form.get("template_note", "").strip() or None)
            return redirect(request, f"/templates/{name}", me, notice=f"saved {name} version {version} (active)")
        options: dict[str, Any] = {option: form[field].strip() for field, option in OPTION_FIELDS
                                   if form.get(field, "").strip()}
        run_id = await run_in_threadpool(runtime.start, definition.name, params, actor=me.actor, **options)
    except ExchangeError as exc:
        return _form_page(request, me, definition, 400, values=form, problem_here=str(exc))
    return redirect(request, f"/runs/{run_id}", me, notice=f"started {definition.name}")


@router.get("/templates/{name}", response_class=HTMLResponse)
def template_page(request: Request, name: str) -> HTMLResponse:
    me = reader(request)
    templates = Templates(runtime_of(request))
    try:
        versions = templates.versions(name)
    except UnknownTemplate as exc:
        return render(request, "error.html", me, 404, message=str(exc))
    return render(request, "template.html", me, name=name, versions=versions, history=templates.history(name))


@router.post("/templates/{name}/activate")
async def activate_template(request: Request, name: str) -> Response:
    me = signed_in(request)
    require(me, EDIT_TEMPLATES, "choosing a template's active version")
    form = await read_form(request, me)
    back = f"/templates/{name}"
    try:
        version = int(form.get("version", ""))
        await run_in_threadpool(Templates(runtime_of(request)).activate, name, version, actor=me.actor,
                                reason=form.get("reason", "").strip() or None)
    except ValueError:
        return redirect(request, back, me, problem=f"version {form.get('version')!r} is not a whole number")
    except ExchangeError as exc:
        return redirect(request, back, me, problem=str(exc))
    return redirect(request, back, me, notice=f"version {version} is now the active one")
