"""The gateway process: the dispatcher that claims runs, the executor that runs them, leases and takeover, fair
share, saturation, store outages, the code watcher, retention and maintenance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.gateway.dispatcher import Dispatcher
    from exchange._engine.gateway.maintenance import Maintenance, may_start_new
    from exchange._engine.gateway.outage import RepeatedLog
    from exchange._engine.gateway.retention import Retention, RetentionKeeper

__all__ = [
    "Dispatcher",
    "Maintenance",
    "RepeatedLog",
    "Retention",
    "RetentionKeeper",
    "may_start_new",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.gateway.dispatcher": ("Dispatcher",),
        "exchange._engine.gateway.maintenance": ("Maintenance", "may_start_new"),
        "exchange._engine.gateway.outage": ("RepeatedLog",),
        "exchange._engine.gateway.retention": ("Retention", "RetentionKeeper"),
    }, globals())
