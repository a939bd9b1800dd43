"""Dependencies point one way: the values (data types, qualities) import nothing of Exchange but its
leaf modules; drivers never import the tags (tags may import drivers) nor the engine; the tag layer
never imports the engine or the store; the store (``exchange._store``) never imports the engine
(``exchange._engine``) nor the authoring API; the engine never imports the step
library, the tags, the drivers or the integrations; nothing but the CLI itself imports the CLI; the
CLI uses the public runtime API; and no module of ``exchange`` takes part in an import cycle (imports
inside functions and under ``TYPE_CHECKING`` count: a cycle hidden there is still two modules that
cannot be understood apart)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "exchange/_drivers": ("exchange.workflows", "exchange._engine", "exchange._store", "exchange._cli",
                          "exchange._tags"),
    "exchange/_tags": ("exchange.workflows", "exchange._engine", "exchange._store", "exchange._cli"),
    "exchange/_integrations": ("exchange.workflows", "exchange._engine", "exchange._store", "exchange._cli"),
    # the public authoring API: thin shims over the engine, nothing of the operator surfaces
    "exchange/workflows": ("exchange._cli", "exchange._api", "exchange._auth", "exchange._opcua_server"),
    # the store keeps records; running workflows is the engine's business, authoring the user's
    "exchange/_store": ("exchange._engine", "exchange.workflows", "exchange._tags", "exchange._drivers",
                        "exchange._api", "exchange._auth", "exchange._plant", "exchange._opcua_server"),
    # the engine runs workflows; what a step does (tags, devices, databases, HTTP) is not its business
    "exchange/_engine": ("exchange.workflows.steps", "exchange.workflows._services", "exchange.workflows.apps",
                         "exchange._tags", "exchange._drivers", "exchange._integrations", "exchange._api",
                         "exchange._auth", "exchange._plant", "exchange._opcua_server"),
    # who may do what: the accounts over the store, nothing of the engine or the API around it
    "exchange/_auth": ("exchange._api", "exchange._cli", "exchange._engine", "exchange.workflows.steps"),
    # the API serves the runtime as the CLI does; the steps and devices are the runtime's business
    "exchange/_api": ("exchange._cli", "exchange.workflows.steps", "exchange._tags", "exchange._drivers"),
    # schedules, triggers and command tags start runs through the runtime, read tags through the tag service
    "exchange/_plant": ("exchange._cli", "exchange._api", "exchange._opcua_server", "exchange._drivers"),
    # the OPC UA server of runs serves the runtime as the API does (its event-loop helper is shared)
    "exchange/_opcua_server": ("exchange._cli", "exchange._api", "exchange.workflows.steps", "exchange._tags",
                               "exchange._drivers.opcua.connection", "exchange._drivers.opcua.driver"),
    "exchange/_config.py": ("exchange.workflows", "exchange._engine", "exchange._store", "exchange._cli",
                            "exchange._drivers"),
    "exchange/errors.py": ("exchange.",),
    "exchange/_backoff.py": ("exchange.",),
    "exchange/_doorbell.py": ("exchange.",),
    "simulators": ("exchange.workflows", "exchange._engine", "exchange._store"),
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


# The modules below the values: they import nothing of Exchange but exchange.errors themselves.
LEAVES = ("exchange.errors", "exchange._arguments", "exchange._timefmt")


def test_values_import_only_the_leaves() -> None:
    """exchange._values is the bottom of the device stack: drivers and tags import it, it imports
    neither (nor the config, the engine, ...), only itself and the leaf modules."""
    files = sorted((ROOT / "exchange" / "_values").rglob("*.py"))
    assert files, "exchange/_values has no modules"
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in imports_of(path)
        if (name == "exchange" or name.startswith("exchange."))
        and name not in LEAVES and name != "exchange._values" and not name.startswith("exchange._values.")
    ]
    assert bad == []
    for leaf in LEAVES:  # what makes them leaves
        path = ROOT / (leaf.replace(".", "/") + ".py")
        assert {n for n in imports_of(path) if n.startswith("exchange")} <= {"exchange.errors"}, leaf


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the ``exchange`` modules it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    modules = {module_name(path): path for path in (ROOT / "exchange").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
                targets.update(submodules or ({node.module} & set(modules)))
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "exchange._engine.inrun.facade" in graph["exchange.workflows.engine.instance"]  # the graph sees imports
    assert cycles(graph) == []


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_only_the_command_line_imports_the_cli() -> None:
    """The CLI is the top layer: the rest of the package never depends on it."""
    top = {ROOT / "exchange" / "__main__.py"}
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "exchange").rglob("*.py"))
        if path not in top and (ROOT / "exchange" / "_cli") not in path.parents
        for name in imports_of(path)
        if name == "exchange._cli" or name.startswith("exchange._cli.")
    ]
    assert bad == []
