"""A real HTTP server on 127.0.0.1 with scripted answers per path and a log of what it received.

``server.script("/orders", Reply(503), Reply(503), Reply(200, {"ok": True}))`` answers the first
three requests to /orders with those replies in order, then repeats the last one. Paths without a
script answer 404. ``server.requests`` lists every request (method, path, query, headers, body).
A reply may hold the answer back until an event is set (``hold=event``) to model a slow service.

Each request carries the server's own times on the monotonic clock (the one the client's waits use,
shared by every thread of the process): ``arrived_at``, taken once the whole request has been read
(so it is never earlier than the client sent it), and ``replied_at``, taken just before the first
byte of the answer is written (so it is never later than the client could have read it). The wait
between an answer and the next request, as the server measures it (the way a Retry-After is meant),
``next.arrived_at - previous.replied_at``, is therefore never shorter than the client's own wait
from reading the answer to sending again: a lower bound on it cannot fail for a client that waited.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes as given
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None  # answer only once this is set (or the server stops)


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    arrived_at: float = 0.0  # time.monotonic() once the request was read
    replied_at: float | None = None  # time.monotonic() before its answer was written; None: not answered

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


class ScriptedHttpServer:
    def __init__(self, tls: tuple[str, str] | None = None, port: int = 0) -> None:
        """``tls``: (certificate file, key file) to serve HTTPS instead of HTTP; ``port`` 0: any free one."""
        self._scripts: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self.requests: list[Received] = []
        self.stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-http", daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self._scripts[path] = list(replies)

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self.requests.clear()

    def received(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            replies = self._scripts.get(path)
            if not replies:
                return Reply(404, {"error": f"no script for {path}"})
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                received = Received(self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()),
                                    body, arrived_at=time.monotonic())
                with owner._lock:
                    owner.requests.append(received)
                reply = owner._next_reply(parts.path)
                if reply.hold is not None:
                    while not reply.hold.wait(0.05) and not owner.stopping.is_set():
                        pass
                if isinstance(reply.body, (dict, list)):
                    payload = json.dumps(reply.body).encode()
                    content_type = "application/json"
                elif isinstance(reply.body, str):
                    payload, content_type = reply.body.encode(), "text/plain; charset=utf-8"
                elif isinstance(reply.body, bytes):
                    payload, content_type = reply.body, "application/octet-stream"
                else:
                    payload, content_type = b"", "text/plain"
                received.replied_at = time.monotonic()
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": content_type, **reply.headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

        return Handler

    def close(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
