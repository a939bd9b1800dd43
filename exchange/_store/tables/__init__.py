"""The tables of the store and the migrations that create and change them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store.tables import schema
    from exchange._store.tables.schema import (
        audit_log,
        control,
        events,
        mailbox,
        nodes,
        owners,
        param_templates,
        plant_state,
        prompts,
        record_values,
        run_columns,
        run_values,
        runs,
        steps,
        streams,
        unit_holders,
        unit_requests,
    )

__all__ = [
    "audit_log",
    "control",
    "events",
    "mailbox",
    "nodes",
    "owners",
    "param_templates",
    "plant_state",
    "prompts",
    "record_values",
    "run_columns",
    "run_values",
    "runs",
    "schema",
    "steps",
    "streams",
    "unit_holders",
    "unit_requests",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store.tables": ("schema",),
        "exchange._store.tables.schema": (
            "audit_log", "control", "events", "mailbox", "nodes", "owners", "param_templates", "plant_state",
            "prompts", "record_values", "run_columns", "run_values", "runs", "steps", "streams", "unit_holders",
            "unit_requests",
        ),
    }, globals())
