"""The gateway process: the dispatcher that claims runs, the executor that runs them, leases and takeover, fair
share, saturation, store outages, the code watcher, retention and maintenance."""

from __future__ import annotations

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
