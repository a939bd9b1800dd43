"""What the gateways of one store share: their node records and the node lock, gateway settings, the plant's
state and recorded file changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store.gateways.file_changes import FileChanges, sqlite_file_changes
    from exchange._store.gateways.gateway_settings import (
        DRAINING_MODES,
        MAINTENANCE,
        RETENTION,
        RETENTION_ARCHIVE,
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
    "RETENTION_ARCHIVE",
    "is_draining",
    "is_draining_value",
    "sqlite_file_changes",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store.gateways.file_changes": ("FileChanges", "sqlite_file_changes"),
        "exchange._store.gateways.gateway_settings": (
            "ControlTable", "DRAINING_MODES", "MAINTENANCE", "RETENTION", "RETENTION_ARCHIVE", "is_draining",
            "is_draining_value",
        ),
        "exchange._store.gateways.node_lock": ("NodeLock",),
        "exchange._store.gateways.nodes": ("NodeTable",),
        "exchange._store.gateways.plant_state": ("PlantStateTable",),
    }, globals())
