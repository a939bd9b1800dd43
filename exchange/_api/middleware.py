"""ASGI middleware: a bound on request bodies, JSON bodies in UTF-8 only, and the security headers of
every answer."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Any
Send = Any
App = Any

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    # the console's own scripts and styles only: no inline script, no third party
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                                 b"form-action 'self'; base-uri 'none'"),
    (b"cache-control", b"no-store"),
)
HSTS = (b"strict-transport-security", b"max-age=31536000")


class _TooLarge(HTTPException):
    """Raised by the counting ``receive`` when the body passes the limit. An HTTPException, because
    FastAPI turns any other error raised while it reads a body into 400 "There was an error parsing
    the body" (a chunked body over the limit got that, not 413), and lets HTTPExceptions through to
    the error answers of problems.py."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, too_large_message(max_bytes))


def too_large_message(max_bytes: int) -> str:
    return f"the request body is larger than {max_bytes} bytes ([api] max_body_bytes)"


class BodyLimit:
    """Refuse (413, one JSON line) a request whose body is larger than ``max_bytes``: by its
    Content-Length when it has one, else (``Transfer-Encoding: chunked``) as soon as what streamed
    in passes the limit, whoever reads it."""

    def __init__(self, app: App, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._refuse(send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message: Message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await refuse(send, 413, too_large_message(self.max_bytes))


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _json_media(content_type: bytes | None) -> tuple[bool, str | None]:
    """Whether a request with this Content-Type has its body read as JSON (as FastAPI decides: no
    type, ``application/json`` or ``application/*+json``), and the ``charset`` it declares, if any."""
    if content_type is None:
        return True, None
    media, *params = content_type.decode("latin-1").split(";")
    kind, _, subtype = media.strip().lower().partition("/")
    if kind != "application" or not (subtype == "json" or subtype.endswith("+json")):
        return False, None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return True, value.strip().strip('"').lower()
    return True, None


def body_encoding_problem(content_type: bytes | None, body: bytes) -> tuple[int, str] | None:
    """Why a JSON body cannot be taken, as (status, message); None when it can (or is no JSON).

    JSON between systems is UTF-8 (RFC 8259, 8.1). Python's ``json.loads`` of bytes also guesses
    UTF-16 and UTF-32, so such a body used to be taken as if it were right, while every other reader
    of the same request (a proxy's log, an audit of what was sent) sees something else. A declared
    other charset is 415; undeclared bytes that are not UTF-8 (a NUL byte: UTF-16 or UTF-32, which
    JSON text in UTF-8 never holds unescaped) are 400."""
    is_json, charset = _json_media(content_type)
    if not is_json or not body:
        return None
    if charset is not None and charset not in ("utf-8", "utf8"):
        return 415, f"the body must be JSON in UTF-8, not {charset} (Content-Type: application/json; charset=utf-8)"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return 400, f"the body is not UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start} (JSON is sent as UTF-8)"
    nul = body.find(b"\x00")
    if nul >= 0:
        return 400, f"the body is not UTF-8 JSON: a NUL byte at offset {nul} (UTF-16 or UTF-32? JSON is sent as UTF-8)"
    return None


class Utf8Json:
    """Refuse a JSON request body that is not UTF-8 (:func:`body_encoding_problem`) before any route
    reads it. The body is read whole here (BodyLimit, outside, bounds it) and handed on unchanged."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        content_type = dict(scope.get("headers", ())).get(b"content-type")
        if not _json_media(content_type)[0]:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message: Message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        problem = body_encoding_problem(content_type, body)
        if problem is not None:
            await refuse(send, *problem)
            return
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that gives ``messages`` first, then whatever ``then`` gives (a disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        message: Message = await then()
        return message

    return replayed


async def refuse(send: Send, status: int, message: str) -> None:
    """Answer ``status`` with one JSON line ``{"error": message}`` and the security headers."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """Add :data:`SECURITY_HEADERS` (and HSTS over TLS) to every answer that does not set them."""

    def __init__(self, app: App, *, tls: bool) -> None:
        self.app = app
        self.extra = (*SECURITY_HEADERS, HSTS) if tls else SECURITY_HEADERS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()),
                                      *(h for h in self.extra if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)
