"""A serial line without hardware: two linked pseudo-terminals made by ``socat pty pty``.

What a USB-to-RS485 adapter and its cable are to a plant engineer: the device (a Modbus RTU server)
opens :attr:`PtyPair.server`, the client (Exchange) opens :attr:`PtyPair.client`, and bytes written to
one end come out of the other. The two paths are symlinks kept across :meth:`PtyPair.stop` and
:meth:`PtyPair.start`, as an adapter's name is across a replug. socat comes from ``scripts/setup.sh``.

A pty does not pace bytes at the baud rate: a frame arrives as fast as the machine moves it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Self

LINK_TIMEOUT_S = 10.0


class PtyPair:
    """``socat`` linking two ptys at ``folder/<name>Client`` and ``folder/<name>Server``."""

    def __init__(self, folder: Path, name: str = "tty") -> None:
        self.client = str(folder / f"{name}Client")
        self.server = str(folder / f"{name}Server")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """Link the pair; returns once socat says both ptys exist. Raises RuntimeError without socat."""
        if shutil.which("socat") is None:
            raise RuntimeError("socat is not installed: run scripts/setup.sh (it installs the Debian package)")
        for link in (self.client, self.server):
            Path(link).unlink(missing_ok=True)
        self._proc = subprocess.Popen(
            ["socat", "-d", "-d", f"pty,raw,echo=0,link={self.client}", f"pty,raw,echo=0,link={self.server}"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        )
        assert self._proc.stderr is not None
        deadline = time.monotonic() + LINK_TIMEOUT_S
        while time.monotonic() < deadline:  # socat says so once both ptys are linked
            line = self._proc.stderr.readline()
            if b"starting data transfer loop" in line:
                threading.Thread(target=self._proc.stderr.read, daemon=True).start()  # drain its log
                return self
            if not line and self._proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"socat did not link the pty pair within {LINK_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Unlink the pair (the cable pulled): whoever has an end open sees it go away."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stderr is not None:
                proc.stderr.close()
