"""``@workflow`` and ``@step``: registration at import time and durable calls inside a run."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from exchange._engine.definition import REGISTRY, WorkflowDef, code_version_of
from exchange._engine.execution.context import current_run
from exchange._engine.execution.hold import ON_STEP_ERROR_CHOICES, checked_on_step_error
from exchange._engine.execution.retry import OPTION_KEYS, RetryPolicy, StepOptions
from exchange._engine.execution.stepper import StepDef, call_step
from exchange.errors import InvalidArgument, WorkflowError

F = TypeVar("F", bound=Callable[..., Any])

NAME_MAX_CHARS = 200  # the store's column for workflow and step names
ON_ERROR = "on_error"


class StepCallOptions(StepOptions, total=False):
    """What a step of the step library that takes retry options per call (``http.request``,
    ``db.*``) takes as keyword arguments: :class:`~exchange._engine.execution.retry.StepOptions` and
    ``on_error`` (see :func:`library_step`). Such a step declares them as
    ``**options: Unpack[StepCallOptions]``, for its signature and type checkers."""

    on_error: str


# What a step of the step library may take per call (see library_step): the retry options and on_error.
CALL_OPTION_KEYS: tuple[str, ...] = tuple(StepCallOptions.__annotations__)
assert CALL_OPTION_KEYS == (*OPTION_KEYS, ON_ERROR)


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
    :mod:`exchange._engine.execution.hold`); anything else is a WorkflowError naming both.
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


def checked_on_error(step_name: str, value: object, error: Callable[[str], Exception] = WorkflowError) -> str:
    """``value`` when it is one of the ``on_step_error`` choices; ``error`` naming the step and them
    otherwise."""
    if not isinstance(value, str) or value not in ON_STEP_ERROR_CHOICES:
        allowed = ", ".join(repr(c) for c in ON_STEP_ERROR_CHOICES)
        raise error(f"step {step_name}: on_error must be one of {allowed}, got {value!r}")
    return value


def step(name: str | None = None, options: StepOptions | None = None, on_error: str | None = None) -> Callable[[F], F]:
    """Make the decorated function a durable step.

    Inside a run each call gets the run's next sequence number; a recorded outcome is returned (or
    its error re-raised) without executing, otherwise the function runs under ``options`` (see
    :class:`~exchange._engine.execution.retry.StepOptions`; a key or value that is wrong is refused here, with
    WorkflowError naming the step and the key) and its outcome is committed before the call returns.
    Outside a run the function is simply called.

    ``on_error``: what the step does when it fails after its retries, overriding the workflow's
    ``on_step_error`` for this step: ``"raise"`` or ``"hold"`` (None: the workflow's setting);
    anything else is a WorkflowError naming the step and the choices.
    """
    return _step(name, options, on_error, ())


def library_step(
    name: str,
    options: StepOptions | None = None,
    *,
    per_call: tuple[str, ...],
    argument_error: Callable[[str], Exception] = InvalidArgument,
) -> Callable[[F], F]:
    """``@step`` for the step library: a call may also pass the keyword arguments named in
    ``per_call`` (from :data:`CALL_OPTION_KEYS`) to override the step's declared retry options or
    its ``on_error`` for that call alone (None, or leaving one out, keeps the declared value).

    They are taken out of the call before the body runs (the function declares them, keyword-only
    or as ``**options: Unpack[StepCallOptions]``, for its signature and type checkers only) and
    checked before anything else happens: a value that is wrong raises ``argument_error`` (an
    InvalidArgument, never retried) naming the step and the option, before a step is recorded or
    anything is sent. A keyword the function does not name is a TypeError, as Python's own, even
    where ``**options`` would take it."""
    unknown = set(per_call) - set(CALL_OPTION_KEYS)
    if unknown:
        raise WorkflowError(f"step {name}: {', '.join(sorted(unknown))} cannot be given per call")
    return _step(name, options, None, per_call, argument_error)


def _step(
    name: str | None,
    options: StepOptions | None,
    on_error: str | None,
    per_call: tuple[str, ...],
    argument_error: Callable[[str], Exception] = InvalidArgument,
) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        step_name = _checked_name("step", name or f"{fn.__module__}.{fn.__qualname__}")
        definition = StepDef(
            step_name, fn, RetryPolicy.from_options(options, step_name),
            None if on_error is None else checked_on_error(step_name, on_error),
        )
        named = _named_parameters(fn) if per_call else None

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            chosen = definition
            if per_call and kwargs:  # most calls pass no keyword at all: nothing to look for
                given = {key: kwargs.pop(key) for key in per_call if key in kwargs}
                if named is not None:
                    for key in kwargs:
                        if key not in named:
                            raise TypeError(f"{fn.__qualname__}() got an unexpected keyword argument {key!r}")
                chosen = _for_this_call(definition, {k: v for k, v in given.items() if v is not None}, argument_error)
            ctx = current_run()
            if ctx is None:
                return fn(*args, **kwargs)
            return call_step(ctx, chosen, args, kwargs)

        wrapper.__exchange_step__ = definition  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def _named_parameters(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The names ``fn`` takes as keywords when it also takes ``**kwargs`` (which would take a
    misspelt option silently); None when it does not (Python refuses an unknown keyword itself)."""
    parameters = inspect.signature(fn).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _for_this_call(definition: StepDef, given: dict[str, Any], error: Callable[[str], Exception]) -> StepDef:
    """``definition`` with the options one call passed (already known keys), checked."""
    if not given:
        return definition
    on_error = given.pop(ON_ERROR, None)
    return dataclasses.replace(
        definition,
        policy=RetryPolicy.from_options(given, definition.name, base=definition.policy, error=error)
        if given else definition.policy,
        on_error=definition.on_error if on_error is None else checked_on_error(definition.name, on_error, error),
    )
