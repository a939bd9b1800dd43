"""Dependencies point one way: the values (data types, qualities) import nothing of Exchange but its
leaf modules; drivers never import the tags (tags may import drivers) nor the engine; the tag layer
never imports the engine or the store; the store (``exchange._store``) never imports the engine
(``exchange._engine``) nor the authoring API; the engine never imports the step
library, the tags, the drivers or the integrations; nothing but the CLI itself imports the CLI; the
CLI uses the public runtime API; and no module of ``exchange`` takes part in an import cycle (imports
inside functions and under ``TYPE_CHECKING`` count: a cycle hidden there is still two modules that
cannot be understood apart).

Inside the engine and the store: each package is entered only through its ``__init__`` (its door),
its rooms import only downwards, the engine reaches the store through the store's door, which offers
no table or statement, and nothing in the step library touches the store."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
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
    # the batch record's HTML renders the dict the runtime gives: nothing of the engine, store or surfaces
    "exchange/_record": ("exchange._engine", "exchange._store", "exchange.workflows", "exchange._cli", "exchange._api",
                         "exchange._auth", "exchange._tags", "exchange._drivers"),
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
    assert "exchange._engine" in graph["exchange.workflows.engine.instance"]  # the graph sees imports
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


# Packages whose modules are reached from outside only through their ``__init__`` (its door): the
# engine and the store, and every package inside them. A door names what it offers in ``__all__``;
# a submodule named there (a vocabulary module such as the store's ``records``) may be imported whole.
SEALED = ("exchange._engine", "exchange._store")

# Packages whose modules are reached from outside only through their ``__init__`` (its door): the
# engine and the store, and every package inside them. A door names what it offers in ``__all__``;
# a submodule named there (a vocabulary module such as the store's ``records``) may be imported whole.
SEALED = ("exchange._engine", "exchange._store")


def door_exports(package: str) -> set[str]:
    """The names in ``__all__`` of a package's ``__init__`` (empty when it has none)."""
    path = ROOT / package.replace(".", "/") / "__init__.py"
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def door_breaches(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    """``importer -> target`` for each import of a sealed package's inside from outside that package."""
    found: list[str] = []
    for importer, targets in sorted(graph.items()):
        for target in sorted(targets):
            if not target.startswith(SEALED) or target in SEALED:
                continue
            parent, _, name = target.rpartition(".")
            if importer == parent or importer.startswith(parent + "."):
                continue  # inside the package that holds it
            if target not in packages and name in door_exports(parent):
                continue  # a submodule the door names (a vocabulary module)
            found.append(f"{importer} -> {target}")
    return found


def test_only_a_package_s_door_is_imported_from_outside_it() -> None:
    packages = {module_name(path) for path in (ROOT / "exchange").rglob("__init__.py")}
    assert door_breaches(import_graph(), packages) == []


def test_the_door_rule_sees_a_breach() -> None:
    graph = {"exchange._api.app": {"exchange._engine.operator.runtime", "exchange._engine"},
             "exchange._engine.inrun.children": {"exchange._engine.operator.runtime", "exchange._engine.operator"},
             "exchange._engine.operator.views": {"exchange._engine.operator.runtime"}}
    assert door_breaches(graph, {"exchange._engine", "exchange._engine.operator"}) == [
        "exchange._api.app -> exchange._engine.operator.runtime",
        "exchange._engine.inrun.children -> exchange._engine.operator.runtime",
    ]


def sealed_packages() -> list[str]:
    return sorted(name for name in (module_name(path) for path in (ROOT / "exchange").rglob("__init__.py"))
                  if name.startswith(SEALED))


@pytest.mark.parametrize("package", sealed_packages())
def test_every_name_a_door_offers_is_found_where_it_says(package: str) -> None:
    """A lazy door (exchange/_doors.py) imports a name on first use: each one it lists must be there,
    and none may be a submodule's name unless it is that submodule (importing the submodule would
    replace the name on the package)."""
    door = importlib.import_module(package)
    offered = door_exports(package)
    assert offered, f"{package} offers nothing"
    submodules = {path.stem for path in (ROOT / package.replace(".", "/")).glob("*.py")}
    submodules |= {path.parent.name for path in (ROOT / package.replace(".", "/")).glob("*/__init__.py")}
    for name in sorted(offered):
        value = getattr(door, name)
        if name in submodules:
            assert isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}", name


# The rooms of the engine and of the store, lowest first: a module imports only its own room and
# the rooms below it. A package's own top-level modules are its vocabulary, below every room
# (the store's records and codec), except those named in ABOVE_THE_ROOMS (the Store facade).
LAYERS = {
    "exchange._engine": ("model", "definition", "execution", "operator", "inrun", "gateway"),
    "exchange._store": ("tables", "sql", "gateways", "admin", "runs"),
}
ABOVE_THE_ROOMS = {"exchange._store.store"}


def rank(module: str, root: str) -> int | None:
    """Where ``module`` stands among the rooms of ``root``: the room's index, -1 for vocabulary,
    above every room for the door and the modules above them; None outside ``root``."""
    rooms = LAYERS[root]
    if module == root or module in ABOVE_THE_ROOMS:
        return len(rooms)
    if not module.startswith(root + "."):
        return None
    first = module[len(root) + 1:].split(".")[0]
    return rooms.index(first) if first in rooms else -1


def layer_breaches(graph: dict[str, set[str]]) -> list[str]:
    found: list[str] = []
    for root in LAYERS:
        for importer, targets in sorted(graph.items()):
            own = rank(importer, root)
            if own is None:
                continue
            found += [f"{importer} -> {target}" for target in sorted(targets)
                      if (theirs := rank(target, root)) is not None and theirs > own]
    return found


def test_the_rooms_of_the_engine_and_the_store_import_only_downwards() -> None:
    for root, rooms in LAYERS.items():
        folder = ROOT / root.replace(".", "/")
        assert {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()} == set(rooms), root
    assert layer_breaches(import_graph()) == []


def test_the_layer_rule_sees_an_upward_import() -> None:
    graph = {"exchange._engine.execution.hold": {"exchange._engine.inrun.operations", "exchange._engine.model"},
             "exchange._store.records": {"exchange._store.store"}}
    assert layer_breaches(graph) == ["exchange._engine.execution.hold -> exchange._engine.inrun.operations",
                                     "exchange._store.records -> exchange._store.store"]


def test_nothing_in_the_step_library_touches_the_store() -> None:
    """Steps work through the engine's in-run operations; the store is the engine's business."""
    bad: list[str] = []
    for path in sorted((ROOT / "exchange" / "workflows" / "steps").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        bad += [f"{path.relative_to(ROOT)} imports {name}" for name in imports_of(path)
                if name == "exchange._store" or name.startswith("exchange._store.")]
        bad += [f"{path.relative_to(ROOT)}:{node.lineno} reads .store" for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr == "store"]
    assert bad == []


def test_the_engine_uses_the_store_s_operations_not_its_tables_or_statements() -> None:
    """The engine reaches the store through its door (and the vocabulary modules it names), and the
    door offers the Store's operations and records, never a table or a statement."""
    graph = import_graph()
    vocabulary = {f"exchange._store.{name}" for name in door_exports("exchange._store")}
    bad = [f"{importer} -> {target}" for importer, targets in sorted(graph.items())
           if importer.startswith("exchange._engine") for target in sorted(targets)
           if target.startswith("exchange._store.") and target not in vocabulary]
    bad += [f"exchange._store -> {target}" for target in sorted(graph["exchange._store"])
            if target.startswith(("exchange._store.tables", "exchange._store.sql"))]
    assert bad == []


def test_a_door_imports_nothing_until_a_name_of_it_is_used() -> None:
    """``import exchange._engine`` costs nothing: a command pays only for the rooms it uses."""
    code = ("import sys, exchange._engine, exchange._store; "
            "print(sorted(m for m in sys.modules if m.startswith(('exchange._engine.', 'exchange._store.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
