"""What the gateways of one store share: their node records and the node lock, gateway settings, the plant's
state and recorded file changes."""

from __future__ import annotations

from exchange._store.gateways.file_changes import FileChanges, sqlite_file_changes
from exchange._store.gateways.gateway_settings import (
    DRAINING_MODES,
    MAINTENANCE,
    RETENTION,
    ControlTable,
    is_draining,
    is_draining_value,
)
from exchange._store.gateways.node_lock import NodeLock
from exchange._store.gateways.nodes import NodeTable
from exchange._store.gateways.plant_state import PlantStateTable

__all__ = [
    "ControlTable",
    "DRAINING_MODES",
    "FileChanges",
    "MAINTENANCE",
    "NodeLock",
    "NodeTable",
    "PlantStateTable",
    "RETENTION",
    "is_draining",
    "is_draining_value",
    "sqlite_file_changes",
]
