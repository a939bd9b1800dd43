"""Which runtime is "the" runtime: the one executing the run on the calling thread, else the process's
(installed with :func:`set_runtime`, or built from the config on first use). The facade
``exchange.workflows.engine.instance`` re-exports :func:`configure`, :func:`current_runtime` and
:func:`set_runtime`; the executor binds the runtime of each run it executes to the run's thread
(:func:`bind_executing`).
"""

from __future__ import annotations

import contextvars
import threading

from exchange._config import Config, load_config
from exchange._engine.operator.runtime import Runtime

_process_runtime: Runtime | None = None
_process_lock = threading.Lock()
_executing: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar("exchange_runtime", default=None)


def set_runtime(runtime: Runtime | None) -> Runtime | None:
    """Install ``runtime`` as the process's runtime (None: forget it); returns the previous one."""
    global _process_runtime
    with _process_lock:
        previous, _process_runtime = _process_runtime, runtime
    return previous


def configure(config: Config) -> Runtime:
    """Build the process runtime from ``config`` and install it."""
    runtime = Runtime(config)
    set_runtime(runtime)
    return runtime


def current_runtime() -> Runtime:
    """The runtime of the run on this thread, else the process runtime (built from the config)."""
    executing = _executing.get()
    if executing is not None:
        return executing
    global _process_runtime
    if _process_runtime is None:
        with _process_lock:
            if _process_runtime is None:
                _process_runtime = Runtime(load_config())
    return _process_runtime


def bind_executing(runtime: Runtime) -> contextvars.Token[Runtime | None]:
    """Make ``runtime`` the current one on this thread while it executes a run."""
    return _executing.set(runtime)


def unbind_executing(token: contextvars.Token[Runtime | None]) -> None:
    """Undo the :func:`bind_executing` that gave ``token`` (the run's body has returned)."""
    _executing.reset(token)
