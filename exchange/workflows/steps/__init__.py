"""The step library: ``tags``, ``wait``, ``sleep``, ``db``, ``http``, ``phase`` (import the modules)."""

from __future__ import annotations

__all__: list[str] = []
