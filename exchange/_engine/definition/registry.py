"""Registered workflows, filled at import time by ``@workflow``."""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exchange._engine.definition.signature import Signature, signature_of
from exchange._store import codec
from exchange.errors import DuplicateWorkflow, InvalidParams, UnknownWorkflow


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    fn: Callable[..., Any]
    module: str
    code_version: str
    description: str
    on_step_error: str = "raise"  # "hold": a step failing after its retries waits for RESUME or STOP

    @functools.cached_property
    def signature(self) -> Signature:
        """The parameters as the check enforces them (read once, on first use: the annotations'
        forward references resolve by then)."""
        return signature_of(self.name, self.fn)

    @functools.cached_property
    def _python_signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)  # a tenth of a millisecond: read once, not per start

    def bind_params(self, params: dict[str, Any], *, known_json: bool = False) -> None:
        """Raise InvalidParams unless ``params`` fit the function's parameters (the one check,
        :meth:`Signature.check`: names, required ones, each value against its annotation) and
        are JSON (``known_json``: the caller has just encoded them)."""
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise InvalidParams(f"workflow {self.name!r}: parameters must be an object with string keys")
        self.signature.check(params)
        try:  # what the check does not model (a positional-only parameter) still fails here
            self._python_signature.bind(**params)
        except TypeError as exc:
            raise InvalidParams(f"workflow {self.name!r}: {exc}") from None
        if known_json:
            return
        try:
            codec.dumps(params)
        except codec.NotJSON as exc:
            raise InvalidParams(f"workflow {self.name!r}: parameters are not JSON: {exc}") from None

    def parameters(self) -> list[str]:
        return list(self._python_signature.parameters)


def code_version_of(fn: Callable[..., Any]) -> str:
    """A short hash of the source of the module that defines ``fn`` (its code version)."""
    module = sys.modules.get(fn.__module__)
    try:
        source = inspect.getsource(module) if module else inspect.getsource(fn)
    except (OSError, TypeError):
        source = fn.__qualname__
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


class Registry:
    def __init__(self) -> None:
        self._workflows: dict[str, WorkflowDef] = {}
        self._lock = threading.Lock()

    def add(self, definition: WorkflowDef) -> None:
        with self._lock:
            existing = self._workflows.get(definition.name)
            if existing is not None and existing.module != definition.module:
                raise DuplicateWorkflow(definition.name, existing.module, definition.module)
            self._workflows[definition.name] = definition  # same module re-imported: replace

    def get(self, name: str) -> WorkflowDef:
        try:
            return self._workflows[name]
        except KeyError:
            raise UnknownWorkflow(name, list(self._workflows)) from None

    def names(self) -> list[str]:
        return sorted(self._workflows)

    def all(self) -> list[WorkflowDef]:
        return [self._workflows[n] for n in self.names()]

REGISTRY = Registry()
