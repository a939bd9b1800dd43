"""The durable engine (private: the authoring API is exchange.workflows.bootstrap,
exchange.workflows.engine.instance and exchange.workflows.steps)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._engine.definition import (
        REGISTRY,
        Registry,
        WorkflowDef,
        checked_fields,
        params_from_form,
        values_from_form,
    )
    from exchange._engine.execution import (
        CALL_OPTION_KEYS,
        HELD_STATE,
        ON_ERROR,
        RunContext,
        StepCallOptions,
        StepCommands,
        StepOptions,
        commands_waiting,
        current_run,
        held_text,
        library_step,
        step,
        store_guard,
        workflow,
    )
    from exchange._engine.gateway import Dispatcher, Maintenance, RepeatedLog, Retention, RetentionKeeper, may_start_new
    from exchange._engine.inrun import (
        Workflows,
        acquire_in_run,
        getWorkflows,
        prompt_in_run,
        release_in_run,
        sleep_in_run,
    )
    from exchange._engine.model import (
        ALLOWED_IN,
        COMMAND_TOPIC,
        COMMANDS,
        CommandName,
        EventView,
        PromptView,
        RunView,
        StepView,
        allowed,
        normalise_command,
        stop_error,
        stop_or_abort_among,
    )
    from exchange._engine.operator import (
        CODE_VERSION_MAX_CHARS,
        NAME_MAX_CHARS,
        PREFIX_MIN_CHARS,
        RUN_ID_CHARS,
        STATE_MAX_CHARS,
        Runtime,
        ServiceKey,
        Templates,
        attention_rows,
        configure,
        current_runtime,
        default_actor,
        progress_history,
        queue_counts,
        row_view,
        service,
        set_runtime,
    )

__all__ = [
    "ALLOWED_IN",
    "CALL_OPTION_KEYS",
    "CODE_VERSION_MAX_CHARS",
    "COMMANDS",
    "COMMAND_TOPIC",
    "CommandName",
    "Dispatcher",
    "EventView",
    "HELD_STATE",
    "Maintenance",
    "NAME_MAX_CHARS",
    "ON_ERROR",
    "PREFIX_MIN_CHARS",
    "PromptView",
    "REGISTRY",
    "RUN_ID_CHARS",
    "Registry",
    "RepeatedLog",
    "Retention",
    "RetentionKeeper",
    "RunContext",
    "RunView",
    "Runtime",
    "STATE_MAX_CHARS",
    "ServiceKey",
    "StepCallOptions",
    "StepCommands",
    "StepOptions",
    "StepView",
    "Templates",
    "WorkflowDef",
    "Workflows",
    "acquire_in_run",
    "allowed",
    "attention_rows",
    "checked_fields",
    "commands_waiting",
    "configure",
    "current_run",
    "current_runtime",
    "default_actor",
    "getWorkflows",
    "held_text",
    "library_step",
    "may_start_new",
    "normalise_command",
    "params_from_form",
    "progress_history",
    "prompt_in_run",
    "release_in_run",
    "queue_counts",
    "row_view",
    "service",
    "set_runtime",
    "sleep_in_run",
    "step",
    "stop_error",
    "stop_or_abort_among",
    "store_guard",
    "values_from_form",
    "workflow",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._engine.definition": (
            "REGISTRY", "Registry", "WorkflowDef", "checked_fields", "params_from_form", "values_from_form",
        ),
        "exchange._engine.execution": (
            "CALL_OPTION_KEYS", "HELD_STATE", "ON_ERROR", "RunContext", "StepCallOptions", "StepCommands",
            "StepOptions",
            "commands_waiting", "current_run", "held_text", "library_step", "step", "store_guard", "workflow",
        ),
        "exchange._engine.gateway": (
            "Dispatcher", "Maintenance", "RepeatedLog", "Retention", "RetentionKeeper", "may_start_new",
        ),
        "exchange._engine.inrun": (
            "Workflows", "acquire_in_run", "getWorkflows", "prompt_in_run", "release_in_run", "sleep_in_run",
        ),
        "exchange._engine.model": (
            "ALLOWED_IN", "COMMANDS", "COMMAND_TOPIC", "CommandName", "EventView", "PromptView", "RunView",
            "StepView", "allowed", "normalise_command", "stop_error",
            "stop_or_abort_among",
        ),
        "exchange._engine.operator": (
            "CODE_VERSION_MAX_CHARS", "NAME_MAX_CHARS", "PREFIX_MIN_CHARS", "RUN_ID_CHARS", "Runtime",
            "STATE_MAX_CHARS", "ServiceKey", "Templates", "attention_rows", "configure", "current_runtime",
            "default_actor", "progress_history", "queue_counts", "row_view", "service", "set_runtime",
        ),
    }, globals())
