"""The step library works through the engine: nothing in ``exchange/workflows/steps`` imports the
store or reaches into a run's ``ctx.store`` (a tag wait asks the engine whether commands are waiting)."""

from __future__ import annotations

from pathlib import Path

STEPS = Path(__file__).resolve().parents[2] / "exchange" / "workflows" / "steps"


def test_no_step_module_touches_the_store() -> None:
    bad = [f"{path.name}: {needle}" for path in sorted(STEPS.rglob("*.py"))
           for needle in ("exchange._store", "ctx.store", ".store.") if needle in path.read_text()]
    assert bad == []
