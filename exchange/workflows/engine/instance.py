"""``getWorkflows()``: the authoring API's runtime accessor (a fixed import path, re-exports only).

    from exchange.workflows.engine.instance import getWorkflows

The facade itself is :mod:`exchange._engine.inrun.facade`; which runtime it reaches is decided by
:mod:`exchange._engine.operator.current`.
"""

from __future__ import annotations

from exchange._engine import Workflows, configure, current_runtime, getWorkflows, set_runtime

__all__ = ["Workflows", "configure", "current_runtime", "getWorkflows", "set_runtime"]
