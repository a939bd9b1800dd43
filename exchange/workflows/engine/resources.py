"""Long-lived resources the step library shares within one runtime (tag service, SQL pools, HTTP).

The runtime owns one :class:`Services`: the first ``get(key, factory)`` builds the resource from the
runtime's config, later calls return the same object; the runtime closes each one (``close()``) on
shutdown. Steps reach it through :func:`exchange.workflows.engine.services.service`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from exchange.config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")


class Services:
    """The resources of one runtime, created lazily and closed together."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: str, factory: Callable[[Config], T]) -> T:
        item = self._items.get(key)
        if item is None:
            with self._lock:
                item = self._items.get(key)
                if item is None:
                    item = factory(self._config)
                    self._items[key] = item
        return item

    def close(self) -> None:
        with self._lock:
            items, self._items = self._items, {}
        for key, item in items.items():
            closer = getattr(item, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:  # one failing close must not keep the others open
                    log.exception("closing service %s failed", key)
