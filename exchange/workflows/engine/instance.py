"""``getWorkflows()``: the authoring API's runtime accessor (a fixed import path, re-exports only).

    from exchange.workflows.engine.instance import getWorkflows

The facade itself is :mod:`exchange.workflows._engine.facade`; which runtime it reaches is decided by
:mod:`exchange.workflows._engine.runtime`.
"""

from __future__ import annotations

from exchange.workflows._engine.facade import Workflows, getWorkflows
from exchange.workflows._engine.runtime import configure, current_runtime, set_runtime

__all__ = ["Workflows", "configure", "current_runtime", "getWorkflows", "set_runtime"]
