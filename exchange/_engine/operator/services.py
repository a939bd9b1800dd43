"""``service(key)``: the step library's way to the runtime's shared resources.

Inside a run it is the runtime executing the run; outside one, the process's runtime.
"""

from __future__ import annotations

from typing import TypeVar

from exchange._engine.operator.current import current_runtime
from exchange._engine.operator.resources import ServiceKey

T = TypeVar("T")


def service(key: ServiceKey[T]) -> T:
    """The current runtime's resource of ``key``, built on first use."""
    return current_runtime().services.get(key)
