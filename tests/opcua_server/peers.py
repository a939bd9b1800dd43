"""Clients from other addresses: a TCP relay that connects to a server from a chosen loopback
address (127.0.0.N), so one test process can sign in as many peers and the server sees each one's
own address (the whole 127.0.0.0/8 is this machine on Linux)."""

from __future__ import annotations

import socket
import threading


class FromAddress:
    """Listens on 127.0.0.1 (:attr:`port`) and relays each connection to ``upstream`` from
    ``source`` (e.g. ``"127.0.0.7"``), byte for byte both ways."""

    def __init__(self, upstream: tuple[str, int], source: str) -> None:
        self._upstream = upstream
        self._source = source
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name=f"relay-{source}").start()

    def close(self) -> None:
        _close(self._listener)
        with self._lock:
            sockets, self._sockets = self._sockets, []
        _close(*sockets)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                upstream.bind((self._source, 0))
                upstream.connect(self._upstream)
            except OSError:
                _close(client, upstream)
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source, target)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.close()
        except OSError:
            pass
