"""What a workflow's parameters look like to a form: kind, default, whether required, the choices.

The kind comes from the annotation (``float``, ``int``, ``bool``, ``str``, ``Literal[...]`` or an
``Enum`` for a choice list), else from the default's type; anything else is entered as JSON. The
console builds its start form from these and turns the submitted text back into values here, so a
wrong entry is refused naming the field before anything is stored.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exchange.errors import InvalidParams

KINDS = ("number", "integer", "boolean", "text", "choice", "json")


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    kind: str  # one of KINDS
    required: bool
    default: Any = None
    choices: tuple[Any, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "required": self.required,
                "default": self.default, "choices": list(self.choices)}


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # a forward reference that does not resolve: fall back to the defaults
        return {}


def _kind_of(annotation: Any, default: Any) -> tuple[str, tuple[Any, ...]]:
    if typing.get_origin(annotation) is typing.Literal:
        return "choice", tuple(typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "choice", tuple(member.value for member in annotation)
    probe = annotation if annotation is not inspect.Parameter.empty else (
        type(default) if default is not inspect.Parameter.empty and default is not None else None)
    if probe is bool:
        return "boolean", ()
    if probe is int:
        return "integer", ()
    if probe is float:
        return "number", ()
    if probe is str:
        return "text", ()
    return "json", ()


def parameter_specs(fn: Callable[..., Any]) -> list[ParameterSpec]:
    """The form of each parameter of ``fn`` (``*args``/``**kwargs`` left out)."""
    hints = _resolved_hints(fn)
    specs: list[ParameterSpec] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = param.default
        kind, choices = _kind_of(hints.get(name, param.annotation), default)
        if isinstance(default, enum.Enum):
            default = default.value
        has_default = default is not inspect.Parameter.empty
        specs.append(ParameterSpec(name=name, kind=kind, required=not has_default,
                                   default=default if has_default else None, choices=choices))
    return specs


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


def params_from_form(specs: list[ParameterSpec], form: Mapping[str, str]) -> dict[str, Any]:
    """The parameters a start form's text fields give (``param.NAME``); an empty optional field
    keeps the default (left out), an empty required one is an error naming it. A boolean field
    absent from the form (an unticked checkbox) is False."""
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
