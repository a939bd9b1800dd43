"""The tables of the store and the migrations that create and change them."""

from __future__ import annotations

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
    run_columns,
    run_values,
    runs,
    steps,
    streams,
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
    "run_columns",
    "run_values",
    "runs",
    "schema",
    "steps",
    "streams",
]
