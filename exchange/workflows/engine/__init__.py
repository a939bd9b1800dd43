"""The durable engine. Public here: :mod:`exchange.workflows.engine.instance` (``getWorkflows``)."""

from __future__ import annotations

__all__: list[str] = []
