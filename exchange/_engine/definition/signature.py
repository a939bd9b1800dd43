"""A workflow's parameters as the one parameter check sees them, and as a start form shows them.

:func:`signature_of` reads each parameter's enforced type from its annotation (what each takes:
:mod:`exchange._engine.definition.paramtypes`), its default and whether it is required.
:meth:`Signature.problems` is the check every start goes through (the CLI, Python ``start`` and
``startChild``, the HTTP API, the console, templates when saved and when started) and the gateway's
preflight of ``[schedules]``/``[triggers]`` params: each value against its type, every required
parameter given, no unknown name (the closest valid one suggested). Nothing is converted: the run
gets the values as sent.

The console builds its start form from the same specs (``kind``: the input shown) and turns the
submitted text into values here (:func:`params_from_form`) before the check refuses what does not
fit.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import json
import math
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exchange._engine.definition import paramtypes
from exchange._engine.definition.paramtypes import ParamType
from exchange.errors import InvalidParams

KINDS = ("number", "integer", "boolean", "text", "choice", "json")
_KIND_OF_TYPE = {paramtypes.FLOAT: "number", paramtypes.INT: "integer", paramtypes.BOOL: "boolean",
                 paramtypes.STR: "text"}
_KIND_OF_DEFAULT = {float: "number", int: "integer", bool: "boolean", str: "text"}


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: its enforced ``type``, whether ``required``, its ``default`` (an Enum's
    value), and ``kind``, the start form's input (one of :data:`KINDS`; from the type, or for an
    unannotated parameter from its default's type: the check takes any JSON there, the form
    offers what the default suggests)."""

    name: str
    type: ParamType
    required: bool
    default: Any = None
    kind: str = "json"

    @property
    def choices(self) -> tuple[Any, ...]:
        return self.type.choices

    @property
    def nullable(self) -> bool:
        return self.type.nullable

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.type.describe(), "required": self.required, "default": self.default,
                "kind": self.kind}


@dataclass(frozen=True)
class Problem:
    """What the check found wrong: ``place`` the parameter (``x``, or inside it ``x[0]``), ``text``
    what is wrong with it (``expects float, got "ten" (str)``) and, for an unknown name, ``takes``:
    the names the workflow takes."""

    place: str
    text: str
    takes: tuple[str, ...] | None = None

    def said(self) -> str:
        """``parameter 'x' expects float, got "ten" (str)`` (as the runtime refuses a start)."""
        takes = "" if self.takes is None else f" (the workflow takes {', '.join(self.takes) or 'no parameters'})"
        return f"parameter {self.place!r} {self.text}{takes}"

    def said_of_key(self, key: str, workflow: str) -> str:
        """``KEY.x expects float, got "ten" (str) (workflow 'plant.cip')`` (as a config check)."""
        takes = "" if self.takes is None else f" takes {', '.join(self.takes) or 'no parameters'}"
        return f"{key}.{self.place} {self.text} (workflow {workflow!r}{takes})"


@dataclass(frozen=True)
class Signature:
    """The parameters of workflow ``workflow``; ``more``: it takes ``**kwargs`` (any other name)."""

    workflow: str
    specs: tuple[ParameterSpec, ...]
    more: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs)

    def problems(self, params: Mapping[str, Any], *, supplied: Collection[str] = ()) -> list[Problem]:
        """Every problem of ``params`` (empty: they fit), in the order of the parameters, unknown
        names last. ``supplied``: names the caller fills in later (a schedule's ``scheduled_at``):
        not required of ``params``."""
        found: list[Problem] = []
        by_name = {spec.name: spec for spec in self.specs}
        for spec in self.specs:
            if spec.name in params:
                wrong = paramtypes.problem(spec.type, params[spec.name], spec.name)
                if wrong is not None:
                    found.append(Problem(*wrong))
            elif spec.required and spec.name not in supplied:
                found.append(Problem(spec.name, f"({spec.type.words()}) is required and was not given"))
        if not self.more:
            for name in params:
                if name not in by_name:
                    close = difflib.get_close_matches(name, self.names, n=1, cutoff=0.6)
                    found.append(Problem(name, "is unknown" + (f"; did you mean {close[0]!r}?" if close else ""),
                                         takes=self.names))
        return found

    def check(self, params: Mapping[str, Any]) -> None:
        """InvalidParams naming each parameter that does not fit, its expected type and the value:
        ``workflow 'plant.valve': parameter 'x' expects float, got "ten" (str)``."""
        found = self.problems(params)
        if found:
            raise InvalidParams(f"workflow {self.workflow!r}: " + "; ".join(p.said() for p in found))


def _hint(fn: Callable[..., Any], name: str, annotation: Any) -> Any:
    def one() -> None: ...

    one.__annotations__ = {name: annotation}
    try:
        return typing.get_type_hints(one, globalns=getattr(fn, "__globals__", None), include_extras=True)[name]
    except Exception:  # a name that does not resolve: this parameter is not checked
        return inspect.Parameter.empty


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The annotations with their forward references resolved; one that does not resolve leaves
    only its own parameter unchecked."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return {name: _hint(fn, name, param.annotation) for name, param in inspect.signature(fn).parameters.items()
                if param.annotation is not inspect.Parameter.empty}


def _spec(name: str, param: inspect.Parameter, annotation: Any) -> ParameterSpec:
    default = param.default
    has_default = default is not inspect.Parameter.empty
    if isinstance(annotation, str):
        annotation = inspect.Parameter.empty  # unresolved: not checked
    expected = paramtypes.type_of(annotation, nullable=has_default and default is None)
    if expected.choices:
        kind = "choice"
    elif annotation is not inspect.Parameter.empty:
        kind = _KIND_OF_TYPE.get(expected.name, "json")
    else:
        kind = _KIND_OF_DEFAULT.get(type(default), "json")
    if isinstance(default, enum.Enum):
        default = default.value
    return ParameterSpec(name=name, type=expected, required=not has_default,
                         default=default if has_default else None, kind=kind)


def signature_of(workflow: str, fn: Callable[..., Any]) -> Signature:
    """The checked signature of ``fn``, registered as ``workflow``."""
    hints = _resolved_hints(fn)
    specs: list[ParameterSpec] = []
    more = False
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind is param.VAR_KEYWORD:
            more = True
        elif param.kind is not param.VAR_POSITIONAL:
            specs.append(_spec(name, param, hints.get(name, param.annotation)))
    return Signature(workflow, tuple(specs), more)


def parameter_specs(fn: Callable[..., Any]) -> list[ParameterSpec]:
    """The spec of each parameter of ``fn`` (``*args``/``**kwargs`` left out)."""
    return list(signature_of(getattr(fn, "__name__", "?"), fn).specs)


def _number(spec: ParameterSpec, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidParams(f"{spec.name}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise InvalidParams(f"{spec.name}: {text!r} is not a finite number")
    return value


def _converted(spec: ParameterSpec, text: str) -> Any:
    if spec.kind == "number":
        return _number(spec, text)
    if spec.kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise InvalidParams(f"{spec.name}: {text!r} is not a whole number") from None
    if spec.kind == "boolean":
        if text.lower() in ("true", "on", "yes", "1"):
            return True
        if text.lower() in ("false", "off", "no", "0"):
            return False
        raise InvalidParams(f"{spec.name}: {text!r} is neither true nor false")
    if spec.kind == "choice":
        for choice in spec.choices:
            if str(choice) == text:
                return choice
        raise InvalidParams(f"{spec.name}: {text!r} is not one of {', '.join(map(str, spec.choices))}")
    if spec.kind == "text":
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidParams(f"{spec.name}: {text!r} is not JSON") from None


def params_from_form(specs: Sequence[ParameterSpec], form: Mapping[str, str]) -> dict[str, Any]:
    """The parameters a start form's text fields give (``param.NAME``); an empty optional field
    keeps the default (left out), an empty required one is an error naming it. A boolean field
    absent from the form (an unticked checkbox) is False. Text that is no value of the field's
    kind is refused here naming the field; what converts is then checked like any start
    (:meth:`Signature.check`, by the runtime and by template saves)."""
    params: dict[str, Any] = {}
    for spec in specs:
        text = form.get(f"param.{spec.name}")
        if spec.kind == "boolean" and text is None:
            params[spec.name] = False
            continue
        if text is None or text.strip() == "":
            if spec.required:
                raise InvalidParams(f"{spec.name}: a value is required")
            continue
        params[spec.name] = _converted(spec, text.strip())
    return params
