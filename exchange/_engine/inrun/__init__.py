"""Operations a workflow performs on its own run (receive, state, sleep, events, streams, child runs, prompts,
units, patched), and the facade the authoring API re-exports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.inrun.facade import Workflows, getWorkflows
    from exchange._engine.inrun.operations import sleep_in_run
    from exchange._engine.inrun.operator_prompts import prompt_in_run
    from exchange._engine.inrun.units import acquire_in_run, release_in_run, units_held_in_run

__all__ = [
    "Workflows",
    "acquire_in_run",
    "getWorkflows",
    "prompt_in_run",
    "release_in_run",
    "sleep_in_run",
    "units_held_in_run",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.inrun.facade": ("Workflows", "getWorkflows"),
        "exchange._engine.inrun.operations": ("sleep_in_run",),
        "exchange._engine.inrun.operator_prompts": ("prompt_in_run",),
        "exchange._engine.inrun.units": ("acquire_in_run", "release_in_run", "units_held_in_run"),
    }, globals())
