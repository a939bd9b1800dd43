"""``http.request``: an HTTP call as a recorded, retryable step with a stable Idempotency-Key.

Retries (defaults: 5 attempts, 1 s, 2 s, 4 s, 8 s apart) cover connection failures, timeouts, 408,
429 and 5xx; a 429/503 ``Retry-After`` replaces the computed delay (one longer than
``retry_after_max_seconds``, default an hour, ends the retries instead). Other 4xx raise
HttpStatusError at once. A call may set its own schedule with the step's retry options as keyword
arguments (``max_attempts=2, interval_seconds=0.5``, ...) and its ``on_error`` (``"hold"``,
``"raise"``); a bad one raises HttpArgumentError before anything is sent.

Requests other than GET/HEAD/OPTIONS carry ``Idempotency-Key``: inside a run it is derived from the
run id and the step's sequence number, so every retry of the call, and its re-execution after a
crash (the same run and step), send the same key and a server that honours the header performs the
operation once. Outside a run each call gets a random key. A key given in ``headers`` wins.
"""

from __future__ import annotations

import uuid
from typing import Any, Unpack

from exchange._engine import CALL_OPTION_KEYS, StepCallOptions, StepOptions, current_run, library_step
from exchange.errors import HttpArgumentError
from exchange.workflows import _services as services

__all__ = ["HTTP_STEP_OPTIONS", "idempotency_key", "request"]

HTTP_STEP_OPTIONS: StepOptions = {
    "retries_allowed": True,
    "max_attempts": 5,
    "interval_seconds": 1.0,
    "backoff_rate": 2.0,
}

# Fixed namespace: keys must stay the same across processes and releases for a given run and step.
_KEY_NAMESPACE = uuid.UUID("6f1c2a57-3d0e-4b8e-9a43-2f7d5c1e8b90")


def idempotency_key() -> str:
    """The Idempotency-Key for the current call: uuid5(run id, step seq) in a run, else random."""
    ctx = current_run()
    if ctx is None or ctx.step is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_KEY_NAMESPACE, f"{ctx.run_id}:{ctx.step.seq}"))


@library_step("http.request", HTTP_STEP_OPTIONS, per_call=CALL_OPTION_KEYS, argument_error=HttpArgumentError)
def request(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    data: Any = None,
    json_body: Any = None,
    timeout_ms: int = 10000,
    **options: Unpack[StepCallOptions],
) -> dict[str, Any]:
    """Send one HTTP request; ``{"status", "headers", "json", "text"}`` (see HttpClient.request).

    Bad arguments (a method outside GET/HEAD/OPTIONS/POST/PUT/PATCH/DELETE, a URL that is not an
    http(s) URL, headers that are not a dict of strings, a ``json_body`` that is not JSON, a
    ``timeout_ms`` that is not a finite number > 0, ...) raise HttpArgumentError, an InvalidArgument:
    nothing is sent and the step is not retried (see
    :func:`exchange._integrations.http.check_request`).

    The keyword arguments of ``options`` (:class:`~exchange._engine.execution.decorators.StepCallOptions`)
    override this call's retry options (see
    :class:`~exchange._engine.execution.retry.StepOptions`; None keeps :data:`HTTP_STEP_OPTIONS`) and its
    ``on_error``; the step wrapper takes them out of the call and checks them before the step starts
    (HttpArgumentError naming the option), so the body never sees them."""
    client = services.http()
    return client.request(
        method,
        url,
        headers=headers,
        params=params,
        data=data,
        json_body=json_body,
        timeout_ms=timeout_ms,
        idempotency_key=idempotency_key(),
    )
