"""Running one step of a run durably: the run's context, its lease, replay of recorded steps, retries and holds
on failure, and the decorators that turn functions into workflows and steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.execution import code_hold, waitpoints
    from exchange._engine.execution.answers import QUIET, Receipt, record_answer, replay_or_record
    from exchange._engine.execution.context import RunContext, bind, current_run, store_guard, unbind
    from exchange._engine.execution.decorators import (
        CALL_OPTION_KEYS,
        ON_ERROR,
        StepCallOptions,
        library_step,
        step,
        workflow,
    )
    from exchange._engine.execution.execution_lease import Lease
    from exchange._engine.execution.hold import HELD_STATE, held_text, held_view
    from exchange._engine.execution.mail import MailLook, commands_waiting, wait_for_mail, wait_for_messages
    from exchange._engine.execution.replay import (
        PATCH_STEP_PREFIX,
        HistoryEnded,
        Position,
        advance,
        finish_in_flight_sleep,
        finish_quiet,
        place,
        tail_is_here,
    )
    from exchange._engine.execution.replay_check import (
        History,
        ReplayOutcome,
        no_workflow,
        recorded_step,
        replay_only,
    )
    from exchange._engine.execution.retry import StepOptions
    from exchange._engine.execution.step_commands import StepCommands
    from exchange._engine.execution.stepper import error_fields, storable_text

__all__ = [
    "CALL_OPTION_KEYS",
    "HELD_STATE",
    "History",
    "HistoryEnded",
    "Lease",
    "MailLook",
    "ON_ERROR",
    "PATCH_STEP_PREFIX",
    "Position",
    "QUIET",
    "Receipt",
    "ReplayOutcome",
    "RunContext",
    "StepCallOptions",
    "StepCommands",
    "StepOptions",
    "advance",
    "bind",
    "code_hold",
    "commands_waiting",
    "current_run",
    "error_fields",
    "finish_in_flight_sleep",
    "finish_quiet",
    "held_text",
    "held_view",
    "library_step",
    "no_workflow",
    "place",
    "record_answer",
    "recorded_step",
    "replay_only",
    "replay_or_record",
    "step",
    "storable_text",
    "store_guard",
    "tail_is_here",
    "unbind",
    "wait_for_mail",
    "wait_for_messages",
    "waitpoints",
    "workflow",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.execution": ("code_hold", "waitpoints"),
        "exchange._engine.execution.answers": ("QUIET", "Receipt", "record_answer", "replay_or_record"),
        "exchange._engine.execution.context": ("RunContext", "bind", "current_run", "store_guard", "unbind"),
        "exchange._engine.execution.decorators": (
            "CALL_OPTION_KEYS", "ON_ERROR", "StepCallOptions", "library_step", "step", "workflow",
        ),
        "exchange._engine.execution.execution_lease": ("Lease",),
        "exchange._engine.execution.hold": ("HELD_STATE", "held_text", "held_view"),
        "exchange._engine.execution.mail": ("MailLook", "commands_waiting", "wait_for_mail", "wait_for_messages"),
        "exchange._engine.execution.replay": (
            "PATCH_STEP_PREFIX", "HistoryEnded", "Position", "advance", "finish_in_flight_sleep", "finish_quiet",
            "place", "tail_is_here",
        ),
        "exchange._engine.execution.replay_check": (
            "History", "ReplayOutcome", "no_workflow", "recorded_step", "replay_only",
        ),
        "exchange._engine.execution.retry": ("StepOptions",),
        "exchange._engine.execution.step_commands": ("StepCommands",),
        "exchange._engine.execution.stepper": ("error_fields", "storable_text"),
    }, globals())
