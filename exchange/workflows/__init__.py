"""Workflows: the authoring API (bootstrap, engine.instance, steps, apps, testing) and the engine."""

from __future__ import annotations

__all__: list[str] = []
