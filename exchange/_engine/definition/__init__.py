"""What a workflow is: the registry of workflows, their signatures and parameter types, and the fields of
prompts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.definition.prompt_fields import checked_answer, checked_fields, values_from_form
    from exchange._engine.definition.registry import REGISTRY, Registry, WorkflowDef, code_version_of
    from exchange._engine.definition.signature import params_from_form

__all__ = [
    "REGISTRY",
    "Registry",
    "WorkflowDef",
    "checked_answer",
    "checked_fields",
    "code_version_of",
    "params_from_form",
    "values_from_form",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.definition.prompt_fields": ("checked_answer", "checked_fields", "values_from_form"),
        "exchange._engine.definition.registry": ("REGISTRY", "Registry", "WorkflowDef", "code_version_of"),
        "exchange._engine.definition.signature": ("params_from_form",),
    }, globals())
