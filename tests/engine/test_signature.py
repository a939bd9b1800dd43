"""A workflow's signature as the one parameter check enforces it (each annotation's type, required
names, unknown names with the closest one) and as a start form: each parameter's kind, default and
choices, and the form's text turned back into values, refusing a wrong entry by naming its field.
The same cases through every entry that starts a run: the tests that import tests/paramcases.py."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pytest

from exchange._engine.definition.signature import parameter_specs, params_from_form, signature_of
from exchange.errors import InvalidParams
from tests.paramcases import REFUSED, Case, refused_cases


class Product(enum.Enum):
    MILK = "milk"
    JUICE = "juice"


def recipe(line: int, target_level: float = 40.0, rinse: bool = True, operator_note: str = "",
           product: Product = Product.MILK, mode: Literal["auto", "manual"] = "auto", batch_size=500,
           limits: dict[str, Any] | None = None, *extra: Any, **more: Any) -> None:
    """A workflow's function as a plant engineer writes it."""


def test_kinds_come_from_annotations_then_defaults() -> None:
    specs = {s.name: s.as_dict() for s in parameter_specs(recipe)}
    assert list(specs) == ["line", "target_level", "rinse", "operator_note", "product", "mode", "batch_size",
                           "limits"]
    assert specs["line"] == {"name": "line", "type": "int", "nullable": False, "choices": [], "required": True,
                             "default": None, "kind": "integer"}
    assert specs["target_level"]["kind"] == "number" and specs["target_level"]["default"] == 40.0
    assert specs["rinse"]["kind"] == "boolean" and specs["operator_note"]["kind"] == "text"
    assert specs["product"] == {"name": "product", "type": "str", "nullable": False, "choices": ["milk", "juice"],
                                "required": False, "default": "milk", "kind": "choice"}
    assert specs["mode"]["choices"] == ["auto", "manual"]
    # no annotation: the check takes any JSON; the form offers what the default suggests
    assert specs["batch_size"]["type"] == "json" and specs["batch_size"]["kind"] == "integer"
    assert specs["limits"] == {"name": "limits", "type": "dict", "nullable": True, "choices": [], "required": False,
                               "default": None, "kind": "json"}


def test_a_form_becomes_typed_parameters() -> None:
    specs = parameter_specs(recipe)
    form = {"param.line": " 3 ", "param.target_level": "42.5", "param.operator_note": "night shift",
            "param.product": "juice", "param.mode": "manual", "param.batch_size": "", "param.limits": '{"hi": 90}'}
    assert params_from_form(specs, form) == {"line": 3, "target_level": 42.5, "rinse": False,
                                             "operator_note": "night shift", "product": "juice", "mode": "manual",
                                             "limits": {"hi": 90}}
    assert params_from_form(specs, {"param.line": "1", "param.rinse": "on"})["rinse"] is True


@pytest.mark.parametrize(("field", "text", "named"), [
    ("line", "", "line: a value is required"),
    ("line", "2.5", "not a whole number"),
    ("target_level", "lots", "not a number"),
    ("target_level", "nan", "not a finite number"),
    ("target_level", "inf", "not a finite number"),
    ("rinse", "maybe", "neither true nor false"),
    ("product", "beer", "not one of milk, juice"),
    ("limits", "{hi: 90", "not JSON"),
])
def test_a_wrong_entry_is_refused_naming_its_field(field: str, text: str, named: str) -> None:
    form = {"param.line": "1", f"param.{field}": text}
    with pytest.raises(InvalidParams) as refused:
        params_from_form(parameter_specs(recipe), form)
    assert str(refused.value).startswith(f"{field}: ") and named in str(refused.value)


# ----- the one check ---------------------------------------------------------------------------------
def valve(x: float, mode: Literal["auto", "manual"] = "auto", count: int = 1, flush: bool = False,
          trim: Optional[float] = None, limits: dict[str, float] | None = None,  # noqa: UP045 (as users write it)
          scheduled_at: str = "", trigger_at: str = "", trigger_value: Any = None) -> None:
    """params.valve of tests/paramcases.py, as a function of this module."""


VALVE = signature_of("params.valve", valve)


@pytest.mark.parametrize("case", refused_cases())
def test_every_refused_case_names_the_parameter_the_type_and_the_value(case: Case) -> None:
    with pytest.raises(InvalidParams) as refused:
        VALVE.check(case.params)
    assert str(refused.value).startswith("workflow 'params.valve': ")
    assert case.named in str(refused.value)


def test_the_cases_are_each_a_different_mistake() -> None:
    assert len({case.named for case in REFUSED}) == len(REFUSED)
    assert len({repr(case.params) for case in REFUSED}) == len(REFUSED)


@pytest.mark.parametrize("params", [
    {"x": 10}, {"x": 2.5}, {"x": 0}, {"x": -1e300}, {"x": 1, "trim": None}, {"x": 1, "trim": 3},
    {"x": 1, "mode": "manual", "count": -7, "flush": True, "limits": {"hi": 90, "lo": 1.5}},
    {"x": 1, "limits": None}, {"x": 1, "trigger_value": {"any": ["json", 1, None]}},
])
def test_what_fits_is_taken_as_given(params: dict[str, Any]) -> None:
    VALVE.check(params)


def test_every_problem_is_named_at_once_and_inside_a_value_too() -> None:
    with pytest.raises(InvalidParams) as refused:
        VALVE.check({"count": "2", "limits": {"hi": "90"}, "mdoe": "auto"})
    assert str(refused.value) == (
        "workflow 'params.valve': parameter 'x' (float) is required and was not given; "
        "parameter 'count' expects int, got \"2\" (str); "
        "parameter 'limits[\"hi\"]' expects float, got \"90\" (str); "
        "parameter 'mdoe' is unknown; did you mean 'mode'? (the workflow takes x, mode, count, flush, trim, "
        "limits, scheduled_at, trigger_at, trigger_value)")


class Speed(enum.IntEnum):
    SLOW = 1
    FAST = 2


def typed(a: list[int], b: dict[str, bool], c: Literal[1, 2, None], d: Speed, e: Annotated[float, "unit: s"],
          f: int | str, g: NotDefinedAnywhere, h: float = None, *rest: Any, **more: Any) -> None:  # type: ignore[assignment]  # noqa: F821, RUF013
    """Annotations a plant engineer may write (``g``'s does not resolve: it is not checked)."""


TYPED = signature_of("typed", typed)
FITS = {"a": [1], "b": {}, "c": None, "d": 2, "e": 1, "f": "x", "g": {"any": 1}}


@pytest.mark.parametrize(("params", "named"), [
    ({"a": [1, 2.5]}, "parameter 'a[1]' expects int, got 2.5 (float)"),
    ({"a": 1}, "parameter 'a' expects list of int, got 1 (int)"),
    ({"b": {"on": 1}}, "parameter 'b[\"on\"]' expects bool, got 1 (int)"),
    ({"c": True}, "parameter 'c' expects one of 1, 2 or null, got true (bool)"),
    ({"c": 3}, "parameter 'c' expects one of 1, 2 or null, got 3 (int)"),
    ({"d": 3}, "parameter 'd' expects one of 1, 2, got 3 (int)"),
    ({"d": "FAST"}, "parameter 'd' expects one of 1, 2, got \"FAST\" (str)"),
    ({"e": "1 s"}, "parameter 'e' expects float, got \"1 s\" (str)"),
    ({"h": "x"}, "parameter 'h' expects float or null, got \"x\" (str)"),
])
def test_element_types_choices_and_extras_are_checked(params: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        TYPED.check(FITS | params)
    assert named in str(refused.value)


def test_what_cannot_be_checked_takes_any_json_and_kwargs_take_any_name() -> None:
    TYPED.check(FITS)
    TYPED.check({"a": [], "b": {"x": False}, "c": 2, "d": 1, "e": 0.5, "f": 3, "g": [None], "h": None, "other": 1})


def test_the_description_is_what_the_check_enforces() -> None:
    described = {spec.name: spec.as_dict() for spec in TYPED.specs}
    assert described["a"]["type"] == "list"
    assert described["a"]["items"] == {"type": "int", "nullable": False, "choices": []}
    assert described["b"]["values"]["type"] == "bool"
    assert (described["c"]["type"], described["c"]["nullable"], described["c"]["choices"]) == ("int", True, [1, 2])
    assert (described["d"]["type"], described["d"]["choices"]) == ("int", [1, 2])
    assert described["e"]["type"] == "float" and described["e"]["kind"] == "number"
    assert described["f"]["type"] == "json" and described["g"]["type"] == "json"  # not checked
    assert (described["h"]["type"], described["h"]["nullable"], described["h"]["required"]) == ("float", True, False)
    assert "rest" not in described and "more" not in described
