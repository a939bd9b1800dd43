"""The runtime: the one way in for the CLI, the Python API, the HTTP API and the OPC UA server of runs (start,
read, command, answer, cancel, retry, fork), and the views it returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.operator.attention import attention_rows, row_view
    from exchange._engine.operator.current import (
        bind_executing,
        configure,
        current_runtime,
        set_runtime,
        unbind_executing,
    )
    from exchange._engine.operator.limits import CODE_VERSION_MAX_CHARS, PREFIX_MIN_CHARS, RUN_ID_CHARS, STATE_MAX_CHARS
    from exchange._engine.operator.overview import progress_history, queue_counts
    from exchange._engine.operator.resources import ServiceKey
    from exchange._engine.operator.runtime import (
        EVENT_KEY_MAX_CHARS,
        TOPIC_MAX_CHARS,
        Runtime,
        default_actor,
    )
    from exchange._engine.operator.services import service
    from exchange._engine.operator.signatures import SIGNATURE_MEANING_MAX_CHARS, Signing
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
    "SIGNATURE_MEANING_MAX_CHARS",
    "Signing",
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

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.operator.attention": ("attention_rows", "row_view"),
        "exchange._engine.operator.current": (
            "bind_executing", "configure", "current_runtime", "set_runtime", "unbind_executing",
        ),
        "exchange._engine.operator.overview": ("progress_history", "queue_counts"),
        "exchange._engine.operator.resources": ("ServiceKey",),
        "exchange._engine.operator.limits": (
            "CODE_VERSION_MAX_CHARS", "PREFIX_MIN_CHARS", "RUN_ID_CHARS", "STATE_MAX_CHARS",
        ),
        "exchange._engine.operator.runtime": ("EVENT_KEY_MAX_CHARS", "Runtime", "TOPIC_MAX_CHARS", "default_actor"),
        "exchange._engine.operator.services": ("service",),
        "exchange._engine.operator.signatures": ("SIGNATURE_MEANING_MAX_CHARS", "Signing"),
        "exchange._engine.operator.start_options": ("StartKeywords",),
        "exchange._engine.operator.templates": ("NAME_MAX_CHARS", "Templates"),
    }, globals())
