"""Loading ``[simulation] model``: a Python file or an importable module with ``step(plant, dt_s)``
and the functions that answer the config's methods (``call``).

A file is loaded as a fresh module each time (two simulators in one process do not share its
globals); a module name is imported as usual. What cannot be loaded is a SimulationError naming the
model and, for a syntax error or an error while importing it, the line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from exchange._config_simulation import model_is_file
from simulators.spec import SimulationError
from simulators.state import StepFunction


def _fail(model: str, exc: BaseException) -> SimulationError:
    if isinstance(exc, SyntaxError):
        return SimulationError(f"model {model}: line {exc.lineno}: {exc.msg}")
    frames = traceback.extract_tb(exc.__traceback__)
    line = next((f"line {f.lineno}: " for f in reversed(frames) if f.filename == model), "")
    return SimulationError(f"model {model} cannot be loaded: {line}{type(exc).__name__}: {exc}")


def _from_file(path: str) -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise SimulationError(f"model {path}: no such file ([simulation] model, relative to the config)")
    name = "exchange_sim_model_" + hashlib.sha1(str(file).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise SimulationError(f"model {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - whatever the engineer's module raises, named with its line
        raise _fail(path, exc) from exc
    return module


def load_module(model: str) -> ModuleType:
    """The module of ``[simulation] model``: a file loaded afresh, or a module imported."""
    if model_is_file(model):
        return _from_file(model)
    try:
        return importlib.import_module(model)
    except Exception as exc:  # noqa: BLE001 - a missing module or one that fails to import
        raise SimulationError(f"model {model} cannot be imported: {type(exc).__name__}: {exc}") from exc


def step_of(module: ModuleType, model: str) -> tuple[StepFunction, str]:
    """``module``'s ``step`` function and the file it is defined in."""
    step = getattr(module, "step", None)
    if not callable(step):
        raise SimulationError(f"model {model} has no function step(plant, dt_s)")
    code = getattr(step, "__code__", None) or getattr(getattr(step, "__func__", None), "__code__", None)
    file = code.co_filename if code is not None else (getattr(module, "__file__", None) or model)
    return step, file


def function_of(module: ModuleType, model: str, name: str, where: str) -> Callable[..., Any]:
    """The function ``name`` of the model (a method's ``call``); SimulationError naming ``where``."""
    function = getattr(module, name, None)
    if not callable(function):
        raise SimulationError(f"{where}: call = {name!r}, but model {model} has no function {name}")
    return function  # type: ignore[no-any-return]


def load_model(model: str) -> tuple[StepFunction, str]:
    """``model``'s ``step`` function and the file it is defined in."""
    return step_of(load_module(model), model)
