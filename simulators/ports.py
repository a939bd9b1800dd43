"""Checking a fixed port before listening on it."""

from __future__ import annotations

import errno
import socket

from simulators.spec import SimulationError


def check_port_free(host: str, port: int, what: str) -> None:
    """SimulationError naming ``what`` when ``port`` on ``host`` is taken (0: any free port, fine).

    Needed because cpppo sets SO_REUSEPORT and would silently share a port with a live server.
    SO_REUSEADDR lets the probe bind over connections a last run left in TIME_WAIT or FIN_WAIT_2
    (else a restart after a stop with clients connected is refused for about a minute), while a
    socket listening on the port still refuses it. The probe must not set SO_REUSEPORT: a live cpppo
    server would then accept it and go unnoticed.
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = "is already in use"
        elif exc.errno == errno.EACCES:
            reason = "needs privileges (ports below 1024): use free ports, or a port above 1023"
        else:
            reason = f"cannot be bound ({exc.strerror})"
        raise SimulationError(f"{what}: port {port} on {host} {reason}") from exc
