"""The authoring API's entry point: the decorators and the runtime accessor.

    from exchange.workflows.bootstrap import workflow, step
    from exchange.workflows.engine.instance import getWorkflows
"""

from __future__ import annotations

from exchange._engine import step, workflow
from exchange.errors import Cancelled, FatalError, RetryableError
from exchange.workflows.engine.instance import getWorkflows

__all__ = ["workflow", "step", "getWorkflows", "RetryableError", "FatalError", "Cancelled"]
