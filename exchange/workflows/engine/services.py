"""``service(key, factory)``: the step library's way to the runtime's shared resources.

Inside a run it is the runtime executing the run; outside one, the process's runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from exchange.config import Config
from exchange.workflows.engine.runtime import current_runtime

T = TypeVar("T")


def service(key: str, factory: Callable[[Config], T]) -> T:
    """The runtime's resource under ``key``, built by ``factory(config)`` on first use."""
    return current_runtime().services.get(key, factory)
