"""Lazy doors: a package's ``__init__`` that names what it offers without importing it all.

The engine and the store are entered only through their packages' ``__init__`` (their doors, see
docs/architecture.md). A door that imported every room it names would make every command pay for the
whole engine: ``exchange runs`` would import the dispatcher, a workflow module the gateway's code
watcher. So a door lists where each of its names lives and imports that module on first use
(PEP 562's module ``__getattr__``); ``from exchange._engine import Runtime`` imports the runtime and
what it needs, nothing else. Type checkers read the same names from the door's ``TYPE_CHECKING``
imports; ``tests/test_architecture.py`` checks that every name a door offers is found where it says.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_door(package: str, where: Mapping[str, tuple[str, ...]],
              namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of door ``package``: each name of ``where[module]`` is imported
    from ``module`` when first asked for, and kept in ``namespace`` (the door's globals) so the next
    lookup is a plain one; the names listed under ``package`` itself are its submodules (vocabulary
    modules offered whole). A name of no module is an AttributeError naming the door."""
    home = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: only the import statement's path is timed by
        # ``python -X importtime``, which bench/recovery.py and the cold-start test read.
        if module == package:
            submodule = f"{package}.{name}"
            __import__(submodule)
            value = sys.modules[submodule]
        else:
            value = getattr(__import__(module, fromlist=("__name__",)), name)
        namespace[name] = value
        return value

    return __getattr__
