"""``@workflow`` and ``@step``: registration at import time and durable calls inside a run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from exchange._engine.context import current_run
from exchange._engine.hold import checked_on_step_error
from exchange._engine.registry import REGISTRY, WorkflowDef, code_version_of
from exchange._engine.retry import RetryPolicy, StepOptions
from exchange._engine.stepper import StepDef, call_step
from exchange.errors import WorkflowError

F = TypeVar("F", bound=Callable[..., Any])

NAME_MAX_CHARS = 200  # the store's column for workflow and step names


def _checked_name(kind: str, name: str) -> str:
    """A workflow or step name the store can hold; WorkflowError naming it otherwise (at import)."""
    if not isinstance(name, str) or not name.strip():
        raise WorkflowError(f"{kind} name must be a non-empty string, got {name!r}")
    if len(name) > NAME_MAX_CHARS or "\x00" in name:
        raise WorkflowError(f"{kind} name {name[:60]!r}... must be at most {NAME_MAX_CHARS} characters without NUL")
    return name


def workflow(name: str | None = None, description: str = "", on_step_error: str = "raise") -> Callable[[F], F]:
    """Register the decorated function as workflow ``name`` (default: module.function).

    The function is returned unchanged: calling it directly runs it without durability, which is
    what unit tests of workflow logic want. Start durable runs with ``getWorkflows().start(name)``.
    ``on_step_error``: ``"raise"`` (a step that fails after its retries raises its error in the
    workflow) or ``"hold"`` (it holds the run for an operator's RESUME or STOP, see
    :mod:`exchange._engine.hold`); anything else is a WorkflowError naming both.
    """

    def decorate(fn: F) -> F:
        wf_name = _checked_name("workflow", name or f"{fn.__module__}.{fn.__qualname__}")
        step_error = checked_on_step_error(wf_name, on_step_error)
        REGISTRY.add(
            WorkflowDef(
                name=wf_name,
                fn=fn,
                module=fn.__module__,
                code_version=code_version_of(fn),
                description=description or (fn.__doc__ or "").strip().split("\n")[0],
                on_step_error=step_error,
            )
        )
        fn.__exchange_workflow__ = wf_name  # type: ignore[attr-defined]
        return fn

    return decorate


def step(name: str | None = None, options: StepOptions | None = None) -> Callable[[F], F]:
    """Make the decorated function a durable step.

    Inside a run each call gets the run's next sequence number; a recorded outcome is returned (or
    its error re-raised) without executing, otherwise the function runs under ``options`` (see
    :class:`~exchange._engine.retry.StepOptions`; a key or value that is wrong is refused here, with
    WorkflowError naming the step and the key) and its outcome is committed before the call returns.
    Outside a run the function is simply called.
    """

    def decorate(fn: F) -> F:
        step_name = _checked_name("step", name or f"{fn.__module__}.{fn.__qualname__}")
        definition = StepDef(step_name, fn, RetryPolicy.from_options(options, step_name))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = current_run()
            if ctx is None:
                return fn(*args, **kwargs)
            return call_step(ctx, definition, args, kwargs)

        wrapper.__exchange_step__ = definition  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate
