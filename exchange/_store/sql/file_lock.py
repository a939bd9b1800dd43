"""An exclusive, non-blocking lock on an open file that the operating system frees when the holding
process ends (kill -9 included): ``flock`` on POSIX systems, ``msvcrt.locking`` on Windows.

Both are advisory between processes that use them, which is all the node lock needs: every gateway
takes the lock the same way.
"""

from __future__ import annotations

import sys
from typing import IO

__all__ = ["try_lock", "unlock"]

if sys.platform == "win32":
    import msvcrt

    def try_lock(handle: IO[str]) -> bool:
        """Lock ``handle``'s file for this process; False if another process holds it."""
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # the first byte stands for the file
        except OSError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def try_lock(handle: IO[str]) -> bool:
        """Lock ``handle``'s file for this process; False if another process holds it."""
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
