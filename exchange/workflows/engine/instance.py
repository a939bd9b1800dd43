"""``getWorkflows()``: the authoring API's runtime accessor (a fixed import path, re-exports only).

    from exchange.workflows.engine.instance import getWorkflows

The facade itself is :mod:`exchange.workflows.engine.facade`; which runtime it reaches is decided by
:mod:`exchange.workflows.engine.runtime`.
"""

from __future__ import annotations

from exchange.workflows.engine.facade import Workflows, getWorkflows
from exchange.workflows.engine.runtime import configure, current_runtime, set_runtime

__all__ = ["Workflows", "configure", "current_runtime", "getWorkflows", "set_runtime"]
