"""Network faults for tests: devices that misbehave at the socket level."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


def silent_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A TCP port on 127.0.0.1 that accepts connections and never answers: a device that hangs.

    Returns the listening socket (close it to end the accept thread) and the accepted connections.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return listener, accepted


class AnswerDropper:
    """A TCP proxy in front of a device that can lose the answer to one chosen request.

    Bytes pass through unchanged until :meth:`arm` is called. Then the next request chunk from the
    client that ``matches`` (e.g. a Modbus write function code) is either forwarded and its answer
    swallowed (``forward=True``: the device applied the write, the client never hears it), or
    swallowed itself (``forward=False``: the device never saw it); in both cases the client's
    connection is then closed, as a broken link would close it. ``fired`` is set when that happened.
    With ``hold=True`` the request is forwarded and its answer withheld while the connection stays
    open: the client waits for an answer that never comes (a write in flight when the client dies).
    ``answer``: which answer chunk is the request's (a protocol whose client has other requests in
    flight on the connection, as an OPC UA session's keep-alive reads): the others pass on; without
    it, the first answer after the request is taken for it.
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._matches: Callable[[bytes], bool] | None = None
        self._forward = True
        self._hold = False
        self._answer: Callable[[bytes], bool] | None = None
        self.fired = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, matches: Callable[[bytes], bool], *, forward: bool, hold: bool = False,
            answer: Callable[[bytes], bool] | None = None) -> None:
        with self._lock:
            self._matches = matches
            self._forward = forward
            self._hold = hold
            self._answer = answer
            self.fired.clear()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            swallow_answer = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, swallow_answer), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, swallow_answer), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, swallow_answer: threading.Event) -> None:
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(client, upstream)
                return
            with self._lock:
                hit = self._matches is not None and self._matches(data)
                forward = self._forward
                if hit:
                    self._matches = None
            if hit and not forward:
                _close(client, upstream)  # the request dies with the link
                self.fired.set()
                return
            if hit:
                swallow_answer.set()
            try:
                upstream.sendall(data)
            except OSError:
                _close(client, upstream)
                return

    def _answers(self, upstream: socket.socket, client: socket.socket, swallow_answer: threading.Event) -> None:
        while True:
            try:
                data = upstream.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(client, upstream)
                return
            if swallow_answer.is_set() and (self._answer is None or self._answer(data)):
                self.fired.set()
                if self._hold:
                    continue  # the device answered; the client never hears it, the link stays up
                _close(client, upstream)  # the device answered; the answer is lost with the link
                return
            try:
                client.sendall(data)
            except OSError:
                _close(client, upstream)
                return


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
