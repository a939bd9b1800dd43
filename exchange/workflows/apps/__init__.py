"""``load()``: import every workflow module under the configured app paths.

Each path is a folder of modules (``apps/``) or a package. Its parent goes on ``sys.path`` so the
modules import under their package name (``apps.demo``) and can import each other. Two workflows
with one name raise DuplicateWorkflow naming both modules.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

from exchange._config import Config
from exchange.errors import ConfigError, WorkflowError

__all__ = ["load"]

log = logging.getLogger(__name__)


def _module_names(folder: Path) -> list[str]:
    package = folder.name
    names = []
    for info in pkgutil.walk_packages([str(folder)], prefix=f"{package}."):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf.startswith(("test_", "_")) or leaf == "conftest":
            continue
        names.append(info.name)
    return sorted(names)


def load(config: Config | None = None, paths: Sequence[str] | None = None) -> list[str]:
    """Import the app modules; returns their names. Errors name the module that failed."""
    if paths is None:
        if config is None:
            from exchange._engine import current_runtime

            config = current_runtime().config
        paths = config.app_paths
    loaded: list[str] = []
    for raw in paths:
        folder = Path(raw).resolve()
        if not folder.is_dir():
            raise ConfigError(f"app path {folder} is not a folder")
        parent = str(folder.parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        for name in _module_names(folder):
            try:
                importlib.import_module(name)
            except WorkflowError:
                raise
            except Exception as exc:
                raise ConfigError(f"app module {name} failed to import: {type(exc).__name__}: {exc}") from exc
            loaded.append(name)
    log.debug("loaded app modules: %s", loaded)
    return loaded
