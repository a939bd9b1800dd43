"""The run page's prompt form: a person answers the prompt the run waits on (one input per field),
and a second person verifies the answer or sends it back. Who may do either is the runtime's to
decide (the prompt's ``role`` and ``verify_role``); the answer goes back to the run page with a
line saying what happened.

A verification (or sending an answer back) in the console is always an electronic signature: the
signing dialog (:mod:`.sign_page`) asks the verifier's password first, as an answer does when
``[signatures] required_for`` lists ``answer:KEY`` (or ``answer:*``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console.pages import form_reason, read_form, redirect, signed_in
from exchange._api.console.present import shown_value
from exchange._api.console.sign_page import Ask, signature
from exchange._api.routes_runs import runtime_of
from exchange._engine import PromptView, Signing, values_from_form
from exchange.errors import ExchangeError

router = APIRouter(include_in_schema=False)


@router.post("/runs/{run_id}/prompts/{key}")
async def answer_prompt(request: Request, run_id: str, key: str) -> Response:
    me = signed_in(request)
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    reason = form_reason(form)
    runtime = runtime_of(request)
    meaning = runtime.signature_required(f"answer:{key}")
    signing: Signing | None = None
    if meaning is not None:  # [signatures] required_for lists this answer: the signing dialog first
        values = tuple((name[len("field."):], shown_value(value)) for name, value in form.items()
                       if name.startswith("field."))
        ask = Ask(title=f"Sign your answer to {key}", back=back, meaning=meaning,
                  detail=(("Prompt", key), *values, ("Reason", reason or "—")))
        given = await signature(request, me, form, ask, required=True)
        if isinstance(given, Response):
            return given
        signing = given

    def answer() -> PromptView:
        prompt = next((p for p in runtime.open_prompts(run_id=run_id) if p["key"] == key), None)
        fields = prompt["fields"] if prompt is not None else {}
        return runtime.answer_prompt(run_id, key, values_from_form(fields, form), actor=me.actor, role=me.role,
                                     reason=reason, signing=signing)

    try:
        view = await run_in_threadpool(answer)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not answered: {exc}")
    if view["status"] == "AWAITING_VERIFICATION":
        return redirect(request, back, me, notice=f"answered {key}; it waits for verification by a second person")
    return redirect(request, back, me, notice=f"answered {key}")


@router.post("/runs/{run_id}/prompts/{key}/verify")
async def verify_prompt(request: Request, run_id: str, key: str) -> Response:
    me = signed_in(request)
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    reason = form_reason(form)
    reject = form.get("decision") == "reject"
    ask = Ask(title=f"Sign: {'send back' if reject else 'verify'} the answer to {key}", back=back,
              meaning="sent back" if reject else "verified",
              detail=(("Prompt", key), ("Decision", "send the answer back" if reject else "verify the answer"),
                      ("Reason", reason or "—")))
    signing = await signature(request, me, form, ask, required=True)  # a verification is a signature
    if isinstance(signing, Response) or signing is None:
        return signing or redirect(request, back, me, problem="not verified: no signature")
    try:
        await run_in_threadpool(runtime_of(request).verify_prompt, run_id, key, actor=me.actor, role=me.role,
                                reason=reason, reject=reject, signing=signing)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not {'sent back' if reject else 'verified'}: {exc}")
    return redirect(request, back, me,
                    notice=f"sent the answer to {key} back" if reject else f"verified the answer to {key}")
