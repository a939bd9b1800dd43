"""The type a workflow parameter's annotation asks for, as the parameter check enforces it on JSON
values (see :mod:`exchange._engine.definition.signature` for the check of a whole parameter set).

What each annotation takes (parameters arrive as JSON, so only JSON types are meant):

* ``float``: a number, an int too (passed on as given: ``10`` stays ``10``, as Python's numeric
  tower lets an int stand for a float, and the run's parameters stay exactly as sent); never a bool,
  nor an int too large to be a float (``float(10**400)`` fails).
* ``int``: a whole number that is not a bool (``3.5``, ``3.0`` and ``"3"`` are refused), within 64
  bits signed (:data:`INT_MIN` to :data:`INT_MAX`): what the run's readers hold as an integer (a
  PostgreSQL BIGINT, a C# long, an OPC UA Int64), so a 400-digit number never reaches a workflow that
  passes it on.
* ``bool``: ``true`` or ``false`` only (not ``1``, not ``"true"``).
* ``str``: text.
* ``list`` / ``list[X]``: an array (each item checked against X); ``dict`` / ``dict[str, X]``: an
  object (each value checked against X).
* ``Optional[X]``, ``X | None``, or a default of ``None``: X or ``null``.
* ``Literal[...]`` and an ``Enum`` (its members' values): one of the choices, of the same type
  (``true`` is not the choice ``1``).
* anything else (no annotation, ``Any``, a class, an unresolvable forward reference, a union of
  several types): any JSON value.
"""

from __future__ import annotations

import enum
import json
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FLOAT, INT, BOOL, STR, LIST, DICT, JSON = "float", "int", "bool", "str", "list", "dict", "json"
_SCALARS: dict[Any, str] = {float: FLOAT, int: INT, bool: BOOL, str: STR}
_SHOWN_MAX_CHARS = 80
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # an ``int`` parameter: 64 bits signed
_FLOAT_MAX = sys.float_info.max


@dataclass(frozen=True)
class ParamType:
    """One parameter's (or one item's) enforced type: ``name`` one of float, int, bool, str, list,
    dict, json; ``nullable``: null is taken too; ``choices``: the value must be one of them;
    ``item``: the type of a list's items or a dict's values (None: any JSON)."""

    name: str
    nullable: bool = False
    choices: tuple[Any, ...] = ()
    item: ParamType | None = None

    def describe(self) -> dict[str, Any]:
        """As ``GET /api/v1/workflows`` shows it: type, nullable, choices, and items (list) or
        values (dict) when their type is checked."""
        shown: dict[str, Any] = {"type": self.name, "nullable": self.nullable, "choices": list(self.choices)}
        if self.item is not None:
            shown["items" if self.name == LIST else "values"] = self.item.describe()
        return shown

    def words(self) -> str:
        """The type in an error message: ``float``, ``int or null``, ``one of "auto", "manual"``,
        ``list of int``."""
        if self.choices:
            text = "one of " + ", ".join(value_text(c) for c in self.choices)
        elif self.item is not None:
            text = f"{self.name} of {self.item.words()}"
        else:
            text = self.name
        return f"{text} or null" if self.nullable and self.name != JSON else text


ANY_JSON = ParamType(JSON, nullable=True)


def value_text(value: Any) -> str:
    """A value as JSON (its repr when it is not JSON), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN_MAX_CHARS else text[: _SHOWN_MAX_CHARS - 3] + "..."


def _choice_type(choices: tuple[Any, ...]) -> str:
    kinds = {BOOL if isinstance(c, bool) else _SCALARS.get(type(c), JSON) for c in choices}
    return kinds.pop() if len(kinds) == 1 else JSON


def _choices(choices: tuple[Any, ...], nullable: bool) -> ParamType:
    if None in choices:
        choices, nullable = tuple(c for c in choices if c is not None), True
    return ParamType(_choice_type(choices), nullable=nullable, choices=choices)


def _scalar(annotation: Any) -> str | None:
    try:
        return _SCALARS.get(annotation)
    except TypeError:  # an unhashable annotation (``x: [int]``): not a type this check knows
        return None


def type_of(annotation: Any, *, nullable: bool = False) -> ParamType:
    """The enforced type of ``annotation`` (``inspect.Parameter.empty`` for none); ``nullable``
    when the parameter's default is None."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_of(args[0], nullable=nullable)
    if origin is typing.Union or origin is types.UnionType:
        rest = tuple(a for a in args if a is not type(None))
        nullable = nullable or len(rest) < len(args)
        if len(rest) == 1:
            return type_of(rest[0], nullable=nullable)
        if all(typing.get_origin(a) is typing.Literal for a in rest):
            return _choices(tuple(c for a in rest for c in typing.get_args(a)), nullable)
        return ANY_JSON  # int | str and the like: not checked
    if origin is typing.Literal:
        return _choices(args, nullable)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _choices(tuple(member.value for member in annotation), nullable)
    scalar = _scalar(annotation)
    if scalar is not None:
        return ParamType(scalar, nullable=nullable)
    if annotation is list or origin is list:
        item = type_of(args[0]) if args else None
        return ParamType(LIST, nullable=nullable, item=None if item is ANY_JSON else item)
    if annotation is dict or origin is dict:
        item = type_of(args[1]) if len(args) == 2 else None
        return ParamType(DICT, nullable=nullable, item=None if item is ANY_JSON else item)
    return ANY_JSON


def _same(value: Any, choice: Any) -> bool:
    if isinstance(value, bool) or isinstance(choice, bool):
        return isinstance(value, bool) and isinstance(choice, bool) and value == choice
    if isinstance(value, (int, float)) and isinstance(choice, (int, float)):
        return value == choice
    return type(value) is type(choice) and bool(value == choice)


def _fits(kind: str, value: Any) -> bool:
    if kind == FLOAT:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == STR:
        return isinstance(value, str)
    if kind == LIST:
        return isinstance(value, (list, tuple))
    if kind == DICT:
        return isinstance(value, Mapping)
    return True


def _out_of_range(kind: str, value: Any) -> str | None:
    """Why a ``value`` of the right JSON type is still not one ``kind`` can hold; None when it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if kind == INT and not INT_MIN <= value <= INT_MAX:
        return f"a 64-bit integer ({INT_MIN} to {INT_MAX})"
    if kind == FLOAT and abs(value) > _FLOAT_MAX:
        return f"a number a float can hold (at most {_FLOAT_MAX:g} either side of 0)"
    return None


def _number_text(value: int) -> str:
    """A whole number as a message shows it: itself, or when long its sign and count of digits
    (counted without ``str()``, which refuses more than 4,300)."""
    if abs(value) < 10**30:
        return str(value)
    digits = int(abs(value).bit_length() * 0.30103) + 1  # log10(2); within one of the count
    return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"


def problem(expected: ParamType, value: Any, where: str) -> tuple[str, str] | None:
    """None when ``value`` fits ``expected``; else ``(place, text)``: ``where`` or the place inside
    it (``where[2]``, ``where["hi"]``) and ``expects float, got "ten" (str)``."""
    if value is None:
        if expected.nullable or (expected.name == JSON and not expected.choices):
            return None
    elif expected.choices:
        if any(_same(value, choice) for choice in expected.choices):
            return None
    elif _fits(expected.name, value):
        bound = _out_of_range(expected.name, value)
        if bound is not None:
            return where, f"expects {expected.words()}, {bound}, got {_number_text(value)}"
        if expected.item is None:
            return None
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            inner = problem(expected.item, item, f"{where}[{value_text(key)}]")
            if inner is not None:
                return inner
        return None
    return where, f"expects {expected.words()}, got {value_text(value)} ({type(value).__name__})"
