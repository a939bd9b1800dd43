"""The base of every JSON body the API takes: one model per route, and what no route may accept.

A misspelt field used to be dropped in silence and the request carried out without it (``{"dryRun":
true}`` deleted runs, ``{"queu": "line2"}`` cancelled every queue's runs), so an unknown field is
refused, naming it and the closest known one. Values are not coerced: ``"no"`` or ``1`` is not a
boolean and ``"5"`` not a number (``"no"`` read as true is the surprise to avoid); an int is taken
where a number is expected. What a value must be beyond its JSON type (a run's parameters, lengths,
ranges) is left to the runtime, which words it as the CLI does.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

UNKNOWN_FIELD = "unknown_field"  # the pydantic error type of an unknown field (problems.py words it)


def unknown_fields_message(unknown: Iterable[str], known: Iterable[str]) -> str:
    """``unknown field "reasn" (did you mean "reason"?)``; the known names when none is close."""
    names = list(unknown)
    choices = list(known)
    shown = ", ".join(f'"{name}"' for name in names)
    head = f"unknown field{'s' if len(names) > 1 else ''} {shown}"
    if len(names) == 1:
        close = difflib.get_close_matches(names[0], choices, n=1, cutoff=0.6)
        if close:
            return f'{head} (did you mean "{close[0]}"?)'
    return f"{head} (known: {', '.join(choices) or 'none'})"


class Body(BaseModel):
    """A request body: unknown fields refused (nested bodies too), no coercion of values.

    ``extra="forbid"`` also puts ``additionalProperties: false`` in the OpenAPI description; the
    check below runs first, so the answer names the closest known field."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [str(key) for key in data if key not in cls.model_fields]
            if unknown:
                raise PydanticCustomError(UNKNOWN_FIELD, "{message}",
                                          {"message": unknown_fields_message(unknown, cls.model_fields)})
        return data
