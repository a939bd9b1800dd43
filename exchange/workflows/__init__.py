"""Workflows: the authoring API (bootstrap, engine.instance, steps, apps, testing). The engine that
runs them is :mod:`exchange._engine`, its records :mod:`exchange._store`."""

from __future__ import annotations

__all__: list[str] = []
