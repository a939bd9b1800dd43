"""The runtime: the one way in for the CLI, the Python API, the HTTP API and the OPC UA server of runs (start,
read, command, answer, cancel, retry, fork), and the views it returns."""

from __future__ import annotations

from exchange._engine.operator.attention import attention_rows, row_view
from exchange._engine.operator.current import bind_executing, configure, current_runtime, set_runtime, unbind_executing
from exchange._engine.operator.overview import progress_history, queue_counts
from exchange._engine.operator.resources import ServiceKey
from exchange._engine.operator.run_lookup import CODE_VERSION_MAX_CHARS, PREFIX_MIN_CHARS, RUN_ID_CHARS
from exchange._engine.operator.runtime import (
    EVENT_KEY_MAX_CHARS,
    STATE_MAX_CHARS,
    TOPIC_MAX_CHARS,
    Runtime,
    default_actor,
)
from exchange._engine.operator.services import service
from exchange._engine.operator.start_options import StartKeywords
from exchange._engine.operator.templates import NAME_MAX_CHARS, Templates

__all__ = [
    "CODE_VERSION_MAX_CHARS",
    "EVENT_KEY_MAX_CHARS",
    "NAME_MAX_CHARS",
    "PREFIX_MIN_CHARS",
    "RUN_ID_CHARS",
    "Runtime",
    "STATE_MAX_CHARS",
    "ServiceKey",
    "StartKeywords",
    "TOPIC_MAX_CHARS",
    "Templates",
    "attention_rows",
    "bind_executing",
    "configure",
    "current_runtime",
    "default_actor",
    "progress_history",
    "queue_counts",
    "row_view",
    "service",
    "set_runtime",
    "unbind_executing",
]
