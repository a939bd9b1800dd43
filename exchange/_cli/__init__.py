"""The ``exchange`` command (:mod:`exchange._cli.main`) and its subcommands."""

from __future__ import annotations

import os
import time

# When (and in which process) the command began to be imported, after the interpreter's own start: a
# gateway's start-up log line times its phases from here (:mod:`exchange._cli.startup`).
STARTED_AT = time.time()
STARTED_IN_PID = os.getpid()
