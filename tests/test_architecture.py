"""Dependencies point one way: drivers and the tag model never import the engine; the engine never
imports the CLI; the CLI uses the public runtime API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "exchange/drivers": ("exchange.workflows", "exchange.cli"),
    "exchange/tags": ("exchange.workflows", "exchange.cli"),
    "exchange/integrations": ("exchange.workflows", "exchange.cli"),
    "exchange/workflows": ("exchange.cli",),
    "exchange/config.py": ("exchange.workflows", "exchange.cli", "exchange.drivers"),
    "exchange/errors.py": ("exchange.",),
    "simulators": ("exchange.workflows",),
}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("area", sorted(FORBIDDEN))
def test_no_forbidden_imports(area: str) -> None:
    target = ROOT / area
    files = [target] if target.is_file() else sorted(target.rglob("*.py"))
    assert files, f"{area} has no modules"
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in imports_of(path)
        if any(name == prefix.rstrip(".") or name.startswith(prefix if prefix.endswith(".") else prefix + ".")
               or name == prefix for prefix in FORBIDDEN[area])
    ]
    assert bad == []
