"""Long-lived resources the step library shares within one runtime (tag service, SQL pools, HTTP).

The runtime owns one :class:`Services`: the first ``get(key)`` builds the resource with the key's
``build(config)``, later calls return the same object; the runtime closes each one (``close()``) on
shutdown. A :class:`ServiceKey` is typed, so ``get(TAGS)`` is a TagService to mypy; the keys of the
step library's services are in :mod:`exchange.workflows._services` (the engine knows none of them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from exchange._config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ServiceKey(Generic[T]):
    """One shared resource: its name (in logs) and how it is built from the runtime's config."""

    name: str
    build: Callable[[Config], T]


class Services:
    """The resources of one runtime, created lazily and closed together."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._items: dict[str, Any] = {}  # by key name
        self._lock = threading.Lock()

    def get(self, key: ServiceKey[T]) -> T:
        """The resource of ``key``, built on first use (once, whichever thread asks first)."""
        item = self._items.get(key.name)
        if item is None:
            with self._lock:
                item = self._items.get(key.name)
                if item is None:
                    item = key.build(self._config)
                    self._items[key.name] = item
        return item  # built by this key's build

    def built(self) -> dict[str, Any]:
        """The resources built so far, by key name (none is built by asking)."""
        with self._lock:
            return dict(self._items)

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
