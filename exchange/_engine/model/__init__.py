"""The engine's vocabulary: operator commands and the views of runs, prompts and steps that every surface shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.model import commands
    from exchange._engine.model.commands import (
        ALLOWED_IN,
        COMMAND_TOPIC,
        COMMANDS,
        ENDING_WAITS,
        Command,
        CommandName,
        allowed,
        normalise_command,
        stop_error,
        stop_or_abort_among,
    )
    from exchange._engine.model.view_types import (
        EventView,
        HeldOnView,
        PhaseRunView,
        PhaseView,
        PromptView,
        RunUnitsView,
        RunView,
        StepView,
    )

__all__ = [
    "ALLOWED_IN",
    "COMMANDS",
    "COMMAND_TOPIC",
    "ENDING_WAITS",
    "Command",
    "CommandName",
    "EventView",
    "HeldOnView",
    "PhaseRunView",
    "PhaseView",
    "PromptView",
    "RunUnitsView",
    "RunView",
    "StepView",
    "allowed",
    "commands",
    "normalise_command",
    "stop_error",
    "stop_or_abort_among",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.model": ("commands",),
        "exchange._engine.model.commands": (
            "ALLOWED_IN", "COMMANDS", "COMMAND_TOPIC", "Command", "CommandName", "ENDING_WAITS", "allowed",
            "normalise_command", "stop_error", "stop_or_abort_among",
        ),
        "exchange._engine.model.view_types": (
            "EventView", "HeldOnView", "PhaseRunView", "PhaseView", "PromptView", "RunUnitsView", "RunView", "StepView",
        ),
    }, globals())
