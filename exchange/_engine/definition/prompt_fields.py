"""The fields of an operator prompt: the form a workflow asks for, and the check of an answer.

A workflow describes each field as a dict (see :func:`checked_fields`); an answer from the CLI, the
API or the console is checked against them here, once, before anything is stored
(:func:`checked_answer`). A value that breaks its field is refused with
:class:`~exchange.errors.InvalidAnswer` naming the field, and the prompt stays open.

Text answers end up in the audit trail, on terminals and in the console, so what they may hold is
decided here for every surface: tabs and line breaks (LF, CR LF: a note may take several lines),
no other control character (NUL, ESC, a lone CR, C1), no bidirectional embedding, override or
isolate (U+202A-U+202E, U+2066-U+2069: they reorder what a reader sees), no line or paragraph
separator and no lone surrogate (not text: undecodable bytes). Blank text (only white space and
invisible format characters) is no value: refused for a required field, None for an optional one.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from exchange._arguments import shown
from exchange.errors import InvalidAnswer, InvalidArgument

FIELD_TYPES = ("float", "int", "bool", "choice", "text")
_COMMON_KEYS = frozenset({"type", "required", "default", "label"})
_KEYS: dict[str, frozenset[str]] = {
    "float": _COMMON_KEYS | {"min", "max", "unit"},
    "int": _COMMON_KEYS | {"min", "max", "unit"},
    "bool": _COMMON_KEYS,
    "choice": _COMMON_KEYS | {"choices"},
    "text": _COMMON_KEYS | {"max_chars", "pattern"},
}
FIELD_NAME_MAX_CHARS = 100
FIELDS_MAX = 50
TEXT_MAX_CHARS = 10_000  # a text answer, unless the field says less
CHOICES_MAX = 200
LABEL_MAX_CHARS = 200
PATTERN_MAX_CHARS = 1000
# \d and \w of a pattern mean ASCII digits and letters, as in the browser's pattern attribute: a lot
# number of Arabic-Indic digits is not a lot number the MES knows.
PATTERN_FLAGS = re.ASCII

# What an answer's text may not hold (see the module docstring); a label holds no line break either.
_NOT_IN_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                          "\ud800-\udfff]|\r(?!\n)")
_NOT_IN_LABEL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

_CALL = "operator.prompt"


def _closest(name: str, known: list[str]) -> str:
    match = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{_CALL}: {where}: {key} must be a finite number, got {shown(value)}")
    return float(value)


def _what(char: str) -> str:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate U+{code:04X} (undecodable bytes?)"
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return f"a bidirectional override U+{code:04X}"
    if code in (0x2028, 0x2029):
        return f"a line or paragraph separator U+{code:04X}"
    return f"a control character U+{code:04X}"


def foreign_character(text: str, allowed_breaks: bool = True) -> str | None:
    """Why ``text`` cannot be an answer's text (``allowed_breaks``: tabs and line breaks are
    fine), naming the first character that is not text and where it is; None when it can."""
    found = (_NOT_IN_TEXT if allowed_breaks else _NOT_IN_LABEL).search(text)
    if found is None:
        return None
    return f"holds {_what(found.group()[0])} at position {found.start()}"


def blank(text: str) -> bool:
    """Only white space and invisible format characters (a zero-width space): no value."""
    return all(char.isspace() or unicodedata.category(char) == "Cf" for char in text)


def _label(where: str, value: Any) -> str:
    if not isinstance(value, str) or blank(value) or len(value) > LABEL_MAX_CHARS:
        raise InvalidArgument(f"{_CALL}: {where}: label must be text of 1 to {LABEL_MAX_CHARS} characters, "
                              f"got {shown(value)}")
    problem = foreign_character(value, allowed_breaks=False)
    if problem is not None:
        raise InvalidArgument(f"{_CALL}: {where}: label {problem}")
    return value


def _pattern(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > PATTERN_MAX_CHARS:
        raise InvalidArgument(f"{_CALL}: {where}: pattern must be a regular expression of 1 to "
                              f"{PATTERN_MAX_CHARS} characters, got {shown(value)}")
    try:
        re.compile(value, PATTERN_FLAGS)
    except re.error as exc:
        raise InvalidArgument(f"{_CALL}: {where}: pattern {shown(value)} is not a valid regular expression: "
                              f"{exc}") from None
    problem = foreign_character(value, allowed_breaks=False)
    if problem is not None:
        raise InvalidArgument(f"{_CALL}: {where}: pattern {problem}")
    return value


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
    if spec.get("label") is not None:
        field["label"] = _label(where, spec["label"])
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
        if spec.get("pattern") is not None:
            field["pattern"] = _pattern(where, spec["pattern"])
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
    strings or numbers) and ``text`` (``max_chars``, at most 10,000; ``pattern``, a regular
    expression the whole value must match, compiled here); every type takes ``required`` (default
    true), ``default`` (a value the field accepts) and ``label`` (one line shown instead of the
    name)."""
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


def _refusal(name: str, field: Mapping[str, Any], problem: str) -> InvalidAnswer:
    return InvalidAnswer(name, problem, label=field.get("label"))


def _value(name: str, field: Mapping[str, Any], value: Any) -> Any:
    kind = field["type"]

    def refuse(problem: str) -> InvalidAnswer:
        return _refusal(name, field, problem)

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
    problem = foreign_character(value)
    if problem is not None:
        raise refuse(f"{problem}; an answer's text may hold tabs and line breaks, no other control "
                     f"character, bidirectional override or lone surrogate")
    if blank(value):
        raise refuse("blank text is no value")
    if field.get("pattern") is not None and re.fullmatch(field["pattern"], value, PATTERN_FLAGS) is None:
        raise refuse(f"{shown(value)} does not match the pattern {field['pattern']}")
    return value


def checked_answer(fields: Mapping[str, Mapping[str, Any]], values: Any) -> dict[str, Any]:
    """The answer's values, one per field (a missing optional field: its default, else None; blank
    text for an optional text field: None); InvalidAnswer naming the first field whose value breaks
    it (its type, min/max, choices, pattern, what text may hold, required, or a name that is no
    field)."""
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
        given_blank = (field["type"] == "text" and isinstance(value, str) and blank(value)
                       and foreign_character(value) is None)
        if value is None or given_blank:
            if field.get("default") is not None and name not in values:
                answer[name] = field["default"]
                continue
            if field["required"]:
                blank_note = " (blank text is no value)" if given_blank else ""
                raise _refusal(name, field, "a value is required" + blank_note)
            answer[name] = None
            continue
        answer[name] = _value(name, field, value)
    return answer


def values_from_form(fields: Mapping[str, Mapping[str, Any]], form: Mapping[str, str]) -> dict[str, Any]:
    """The values a form's text inputs give (``field.NAME``), each turned into its field's type: a
    number input's text into a float or int, a ticked checkbox (any value) into True and an absent
    one into False, a select's text into the matching choice; an empty number input or select is no
    value (the field's default, or "a value is required"), a text input goes as typed (blank: no
    value, as everywhere). InvalidAnswer naming the field for text that is not its type; the rest
    of the check is :func:`checked_answer`'s."""
    values: dict[str, Any] = {}
    for name, field in fields.items():
        text = form.get(f"field.{name}")
        kind = field["type"]
        if kind == "bool":
            values[name] = text is not None
            continue
        if text is None or (kind != "text" and text.strip() == ""):
            continue
        text = text.strip() if kind != "text" else text
        if kind in ("float", "int"):
            try:
                number = float(text) if kind == "float" else int(text)
            except ValueError:
                raise _refusal(name, field, f"{shown(text)} is not a{' whole' if kind == 'int' else ''} "
                                            f"number") from None
            values[name] = number
        elif kind == "choice":
            values[name] = next((choice for choice in field["choices"] if str(choice) == text), text)
        else:
            values[name] = text
    return checked_answer(fields, values)
