"""Exchange: durable workflows for plants.

The public API (what apps may import) is pinned by tests/test_public_api.py: exchange.errors and the
authoring modules under exchange.workflows (bootstrap, engine.instance, steps.*, apps, testing).
Everything else is internal and may change.
"""

from __future__ import annotations

__all__: list[str] = []
