"""The fields of an operator prompt: the form a workflow asks for, and the check of an answer.

A workflow describes each field as a dict (see :func:`checked_fields`); an answer from the CLI, the
API or the console is checked against them here, once, before anything is stored
(:func:`checked_answer`). A value that breaks its field is refused with
:class:`~exchange.errors.InvalidAnswer` naming the field, and the prompt stays open.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from exchange._arguments import shown
from exchange.errors import InvalidAnswer, InvalidArgument

FIELD_TYPES = ("float", "int", "bool", "choice", "text")
_KEYS: dict[str, frozenset[str]] = {
    "float": frozenset({"type", "min", "max", "unit", "required", "default"}),
    "int": frozenset({"type", "min", "max", "unit", "required", "default"}),
    "bool": frozenset({"type", "required", "default"}),
    "choice": frozenset({"type", "choices", "required", "default"}),
    "text": frozenset({"type", "required", "default", "max_chars"}),
}
FIELD_NAME_MAX_CHARS = 100
FIELDS_MAX = 50
TEXT_MAX_CHARS = 10_000  # a text answer, unless the field says less
CHOICES_MAX = 200

_CALL = "operator.prompt"


def _closest(name: str, known: list[str]) -> str:
    match = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{_CALL}: {where}: {key} must be a finite number, got {shown(value)}")
    return float(value)


def _checked_field(name: str, spec: Any) -> dict[str, Any]:
    where = f"field {name!r}"
    if not isinstance(spec, Mapping):
        raise InvalidArgument(f"{_CALL}: {where} must be a dict with a 'type', got {shown(spec)}")
    kind = spec.get("type")
    if kind not in FIELD_TYPES:
        raise InvalidArgument(f"{_CALL}: {where}: type must be one of {', '.join(FIELD_TYPES)}, got {shown(kind)}")
    unknown = sorted(set(map(str, spec)) - _KEYS[kind])
    if unknown:
        hint = _closest(unknown[0], sorted(_KEYS[kind]))
        raise InvalidArgument(f"{_CALL}: {where}: unknown key {unknown[0]!r}{hint} "
                              f"(a {kind} field takes {', '.join(sorted(_KEYS[kind]))})")
    field: dict[str, Any] = {"type": kind}
    required = spec.get("required", True)
    if not isinstance(required, bool):
        raise InvalidArgument(f"{_CALL}: {where}: required must be true or false, got {shown(required)}")
    field["required"] = required
    if kind in ("float", "int"):
        for bound in ("min", "max"):
            if spec.get(bound) is not None:
                field[bound] = _number(where, bound, spec[bound])
                if kind == "int" and not field[bound].is_integer():
                    raise InvalidArgument(f"{_CALL}: {where}: {bound} of an int field must be whole, got {spec[bound]}")
        if "min" in field and "max" in field and field["min"] > field["max"]:
            raise InvalidArgument(f"{_CALL}: {where}: min {spec['min']} is above max {spec['max']}")
        if spec.get("unit") is not None:
            if not isinstance(spec["unit"], str) or len(spec["unit"]) > 40:
                raise InvalidArgument(f"{_CALL}: {where}: unit must be text of at most 40 characters")
            field["unit"] = spec["unit"]
    if kind == "choice":
        choices = spec.get("choices")
        if (not isinstance(choices, (list, tuple)) or not choices or len(choices) > CHOICES_MAX
                or not all(isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in choices)):
            raise InvalidArgument(f"{_CALL}: {where}: choices must be a list of 1 to {CHOICES_MAX} strings or "
                                  f"numbers, got {shown(choices)}")
        if len(set(map(repr, choices))) != len(choices):
            raise InvalidArgument(f"{_CALL}: {where}: choices must not repeat")
        field["choices"] = list(choices)
    if kind == "text":
        limit = spec.get("max_chars", TEXT_MAX_CHARS)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= TEXT_MAX_CHARS:
            raise InvalidArgument(f"{_CALL}: {where}: max_chars must be a whole number from 1 to {TEXT_MAX_CHARS}")
        field["max_chars"] = limit
    if "default" in spec and spec["default"] is not None:
        try:
            field["default"] = _value(name, field, spec["default"])
        except InvalidAnswer as exc:
            raise InvalidArgument(f"{_CALL}: {where}: the default does not fit: {exc.problem}") from None
    return field


def checked_fields(fields: Any) -> dict[str, dict[str, Any]]:
    """The prompt's fields, each normalised (``required`` set, bounds as floats); InvalidArgument
    naming the field and the key that cannot be used.

    ``fields`` maps a field name (text, at most 100 characters) to ``{"type": T, ...}`` with T one of
    ``float``/``int`` (``min``, ``max``, ``unit``), ``bool``, ``choice`` (``choices``: a list of
    strings or numbers) and ``text`` (``max_chars``, at most 10,000); every type takes ``required``
    (default true) and ``default`` (a value the field accepts)."""
    if not isinstance(fields, Mapping) or not fields:
        raise InvalidArgument(f"{_CALL}: fields must be a non-empty dict of field name -> field, got {shown(fields)}")
    if len(fields) > FIELDS_MAX:
        raise InvalidArgument(f"{_CALL}: at most {FIELDS_MAX} fields, got {len(fields)}")
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in fields.items():
        if not isinstance(name, str) or not name.strip() or len(name) > FIELD_NAME_MAX_CHARS:
            raise InvalidArgument(f"{_CALL}: a field name must be text of 1 to {FIELD_NAME_MAX_CHARS} characters, "
                                  f"got {shown(name)}")
        checked[name] = _checked_field(name, spec)
    return checked


def _value(name: str, field: Mapping[str, Any], value: Any) -> Any:
    kind = field["type"]

    def refuse(problem: str) -> InvalidAnswer:
        return InvalidAnswer(name, problem)

    if kind in ("float", "int"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise refuse(f"expects a{'n' if kind == 'int' else ''} {kind}, got {shown(value)}")
        if not math.isfinite(value):
            raise refuse(f"expects a finite number, got {value}")
        if kind == "int" and not isinstance(value, int):
            raise refuse(f"expects a whole number, got {value}")
        unit = f" {field['unit']}" if field.get("unit") else ""
        if field.get("min") is not None and value < field["min"]:
            raise refuse(f"{value}{unit} is below the minimum {field['min']:g}{unit}")
        if field.get("max") is not None and value > field["max"]:
            raise refuse(f"{value}{unit} is above the maximum {field['max']:g}{unit}")
        return float(value) if kind == "float" else int(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise refuse(f"expects true or false, got {shown(value)}")
        return value
    if kind == "choice":
        for choice in field["choices"]:
            if value == choice and isinstance(value, bool) is isinstance(choice, bool):
                return choice
        raise refuse(f"{shown(value)} is not one of {', '.join(map(str, field['choices']))}")
    if not isinstance(value, str):
        raise refuse(f"expects text, got {shown(value)}")
    limit = int(field.get("max_chars", TEXT_MAX_CHARS))
    if len(value) > limit:
        raise refuse(f"is {len(value)} characters long; at most {limit}")
    return value


def checked_answer(fields: Mapping[str, Mapping[str, Any]], values: Any) -> dict[str, Any]:
    """The answer's values, one per field (a missing optional field: its default, else None);
    InvalidAnswer naming the first field whose value breaks it (its type, min/max, choices,
    required, or a name that is no field)."""
    if not isinstance(values, Mapping):
        raise InvalidAnswer(None, f"the values must be a dict of field name -> value, got {shown(values)}")
    known = list(fields)
    for name in values:
        if name not in fields:
            raise InvalidAnswer(str(name), f"is not a field of this prompt{_closest(str(name), known)} "
                                           f"(fields: {', '.join(known)})")
    answer: dict[str, Any] = {}
    for name, field in fields.items():
        value = values.get(name)
        if value is None or (field["type"] == "text" and value == "" and not field["required"]):
            if field.get("default") is not None and name not in values:
                answer[name] = field["default"]
                continue
            if field["required"]:
                raise InvalidAnswer(name, "a value is required")
            answer[name] = None
            continue
        answer[name] = _value(name, field, value)
    return answer


def values_from_form(fields: Mapping[str, Mapping[str, Any]], form: Mapping[str, str]) -> dict[str, Any]:
    """The values a form's text inputs give (``field.NAME``), each turned into its field's type: a
    number input's text into a float or int, a ticked checkbox (any value) into True and an absent
    one into False, a select's text into the matching choice; an empty input is no value (the field's
    default, or "a value is required"). InvalidAnswer naming the field for text that is not its
    type; the rest of the check is :func:`checked_answer`'s."""
    values: dict[str, Any] = {}
    for name, field in fields.items():
        text = form.get(f"field.{name}")
        kind = field["type"]
        if kind == "bool":
            values[name] = text is not None
            continue
        if text is None or text.strip() == "":
            continue
        text = text.strip() if kind != "text" else text
        if kind in ("float", "int"):
            try:
                number = float(text) if kind == "float" else int(text)
            except ValueError:
                raise InvalidAnswer(name, f"{text!r} is not a{' whole' if kind == 'int' else ''} number") from None
            values[name] = number
        elif kind == "choice":
            values[name] = next((choice for choice in field["choices"] if str(choice) == text), text)
        else:
            values[name] = text
    return checked_answer(fields, values)
