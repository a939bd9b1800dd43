"""Network faults for tests: devices that misbehave at the socket level."""

from __future__ import annotations

import socket
import threading


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
