"""A workflow's signature as a start form: each parameter's kind, default and choices, and the form's
text turned back into values, refusing a wrong entry by naming its field."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pytest

from exchange.errors import InvalidParams
from exchange.workflows._engine.signature import parameter_specs, params_from_form


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
    assert specs["line"] == {"name": "line", "kind": "integer", "required": True, "default": None, "choices": []}
    assert specs["target_level"]["kind"] == "number" and specs["target_level"]["default"] == 40.0
    assert specs["rinse"]["kind"] == "boolean" and specs["operator_note"]["kind"] == "text"
    assert specs["product"] == {"name": "product", "kind": "choice", "required": False, "default": "milk",
                                "choices": ["milk", "juice"]}
    assert specs["mode"]["choices"] == ["auto", "manual"]
    assert specs["batch_size"]["kind"] == "integer"  # from the default: no annotation
    assert specs["limits"]["kind"] == "json"


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
