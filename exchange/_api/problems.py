"""Errors as HTTP answers: a status and a one-line ``{"error": ...}``.

=======================================================  ======
UnknownRun, UnknownWorkflow, UnknownTemplate             404
AmbiguousRun, InvalidParams, InvalidArgument,            400
InvalidAnswer, UnknownCommand, AccessError, malformed or
invalid body (an unknown field, a value of the wrong
JSON type)
a wrong or missing credential                            401
a role that does not allow the action (NotAllowed), a    403
CSRF mismatch
CommandRefused, PromptNotOpen, a finished run            409
(WorkflowError)
a body above ``[api] max_body_bytes``                    413
too many failed sign-ins                                 429 (Retry-After)
StoreError (the store is unreachable)                    503
=======================================================  ======
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from exchange._api.bodies import UNKNOWN_FIELD
from exchange.errors import (
    AccessError,
    AmbiguousRun,
    CommandRefused,
    ExchangeError,
    InvalidAnswer,
    InvalidArgument,
    InvalidParams,
    NotAllowed,
    SignInRefused,
    StoreError,
    UnknownCommand,
    UnknownRun,
    UnknownTemplate,
    UnknownUser,
    UnknownWorkflow,
    WorkflowError,
)

log = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (SignInRefused, 401),
    (UnknownRun, 404),
    (UnknownWorkflow, 404),
    (UnknownTemplate, 404),
    (UnknownUser, 404),
    (AmbiguousRun, 400),
    (InvalidParams, 400),
    (UnknownCommand, 400),
    (InvalidAnswer, 400),
    (NotAllowed, 403),
    (AccessError, 400),
    (InvalidArgument, 400),
    (CommandRefused, 409),
    (StoreError, 503),
    (WorkflowError, 409),
)
MESSAGE_MAX_CHARS = 500


def one_line(message: str) -> str:
    line = " ".join(str(message).split())
    return line if len(line) <= MESSAGE_MAX_CHARS else line[:MESSAGE_MAX_CHARS] + "..."


def problem(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


def status_of(exc: ExchangeError) -> int:
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 400


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words (never the value: it may be a password)."""
    if value is None:
        return "null"
    for kind, words in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
                        (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return words
    return "a value"


def _validation_message(exc: RequestValidationError) -> str:
    """The first problem, naming its field: ``options: unknown field "prio" (did you mean
    "priority"?)``, ``strict: Input should be a valid boolean (got a string)``."""
    errors: list[Any] = list(exc.errors())
    if not errors:
        return "invalid request"
    first = errors[0]
    kind = first.get("type")
    if kind == "json_invalid":
        return f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'malformed')})"
    loc = [str(part) for part in first.get("loc", ())]
    path = loc[1:] if loc[:1] == ["body"] else loc
    message = str(first.get("msg", "invalid"))
    if kind == "extra_forbidden" and path:  # a model that forbids extras without bodies.Body's check
        *path, name = path
        message = f'unknown field "{name}"'
    elif isinstance(kind, str) and kind.endswith("_type") and "input" in first:
        message += f" (got {_json_kind(first['input'])})"
    where = ".".join(path)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if kind in (UNKNOWN_FIELD, "extra_forbidden"):
        return f"{where}: {message}{more}" if where else message + more
    return f"{where or 'the body'}: {message}{more}"


def install(app: FastAPI) -> None:
    """Every error leaves the API as one JSON line, never a traceback."""

    @app.exception_handler(ExchangeError)
    async def exchange_error(_request: Request, exc: ExchangeError) -> JSONResponse:
        status = status_of(exc)
        headers = None
        if isinstance(exc, SignInRefused) and exc.retry_after_seconds is not None:
            status = 429
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_seconds)))}
        if status >= 500:
            log.warning("API answered %d: %s", status, exc)
        return problem(status, str(exc), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem(400, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), dict(exc.headers or {}) or None)

    @app.exception_handler(json.JSONDecodeError)
    async def bad_json(_request: Request, exc: json.JSONDecodeError) -> JSONResponse:
        return problem(400, f"the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
