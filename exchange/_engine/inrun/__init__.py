"""Operations a workflow performs on its own run (receive, state, sleep, events, streams, child runs, prompts,
patched), and the facade the authoring API re-exports."""

from __future__ import annotations

from exchange._engine.inrun.facade import Workflows, getWorkflows
from exchange._engine.inrun.operations import sleep_in_run
from exchange._engine.inrun.operator_prompts import prompt_in_run

__all__ = [
    "Workflows",
    "getWorkflows",
    "prompt_in_run",
    "sleep_in_run",
]
