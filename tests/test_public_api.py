"""The public surface is pinned: these modules and names are what user code may import; every other
module of the package is private (a leading underscore in its path) and may move without notice.

A change here is a change of the API that plant engineers' apps are written against: add a name
on purpose, never remove one without a deprecation."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PUBLIC: dict[str, list[str]] = {
    "exchange": [],
    "exchange.errors": [
        "AbortRequested", "AccessError", "AmbiguousRun", "AnswerLost", "Cancelled", "CommandRefused",
        "CommunicationError", "ConfigError",
        "ConfirmTimeout", "DatabaseError", "DeviceError", "DuplicateWorkflow", "ExchangeError", "FatalError",
        "HttpArgumentError",
        "HttpRequestError", "HttpRetryableStatus", "HttpStatusError", "InvalidAnswer", "InvalidArgument",
        "InvalidParams", "NonDeterminismError", "NotAllowed", "OperationInStepError", "OutputTooLarge",
        "OutsideRunError", "OwnershipLost",
        "PhaseAborted", "PhaseError", "PhaseOwnedElsewhere", "PhaseStopped", "PhaseTimeout",
        "PromptNotOpen", "PromptTimeout",
        "ReadOnlyTag", "RecordedStepError", "RetryableError", "RunControl", "RunInterrupted",
        "SignInRefused", "SqlArgumentError", "StepError", "StepOutputError", "StopRequested", "StoreDataError",
        "StoreDiskFull", "StoreError", "StoreLost",
        "Suspended", "TagError", "TagPathError", "TagRangeError", "TagTypeError", "UnknownCommand",
        "UnitTimeout", "UnknownDatabase", "UnknownDevice", "UnknownRun", "UnknownTag", "UnknownTemplate", "UnknownUser",
        "UnknownWorkflow",
        "WorkflowError", "WriteInDoubt",
    ],
    "exchange.workflows": [],
    "exchange.workflows.bootstrap": ["Cancelled", "FatalError", "RetryableError", "getWorkflows", "step", "workflow"],
    "exchange.workflows.engine": [],
    "exchange.workflows.engine.instance": ["Workflows", "configure", "current_runtime", "getWorkflows",
                                           "set_runtime"],
    "exchange.workflows.apps": ["load"],
    "exchange.workflows.testing": ["HistoryDiverges", "replay_history", "running_engine"],
    "exchange.workflows.steps": [],
    "exchange.workflows.steps.tags": ["TAG_WRITE_OPTIONS", "call", "read", "tag_service", "write", "write_confirm"],
    "exchange.workflows.steps.db": ["DB_STEP_OPTIONS", "query", "transaction", "update"],
    "exchange.workflows.steps.http": ["HTTP_STEP_OPTIONS", "idempotency_key", "request"],
    "exchange.workflows.steps.wait": ["until_tag", "until_tag_equals"],
    "exchange.workflows.steps.phase": ["run"],
    "exchange.workflows.steps.units": ["acquire"],
    "exchange.workflows.steps.sleep": ["sleep_chunked", "sleep_ms"],
    "exchange.workflows.steps.control": ["AbortRequested", "StopRequested", "checkpoint"],
    "exchange.workflows.steps.operator": ["AbortRequested", "PromptTimeout", "StopRequested", "prompt"],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_public_module_exports_exactly_its_pinned_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert sorted(exported) == sorted(PUBLIC[name])
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == [], f"{name}.__all__ names what it does not define: {missing}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_other_module_is_private() -> None:
    exposed = [
        module_name(path)
        for path in sorted((ROOT / "exchange").rglob("*.py"))
        if module_name(path) not in PUBLIC
        and path.name != "__main__.py"  # `python -m exchange`: an entry point, not importable API
        and not any(part.startswith("_") and not part.startswith("__") for part in path.relative_to(ROOT).parts)
    ]
    assert exposed == [], f"modules outside the public surface without a leading underscore: {exposed}"


def test_the_authoring_api_of_the_seed_imports() -> None:
    """The seed's own import lines, verbatim, and the names are what it says they are."""
    from exchange.workflows.apps import load
    from exchange.workflows.bootstrap import step, workflow
    from exchange.workflows.engine.instance import getWorkflows
    from exchange.workflows.steps import db, http, sleep, tags, wait
    from exchange.workflows.steps.sleep import sleep_chunked
    assert callable(workflow) and callable(step) and callable(getWorkflows) and callable(load)
    assert sleep_chunked is sleep.sleep_chunked
    assert all(callable(f) for f in (tags.read, tags.write, tags.write_confirm, db.query, db.update,
                                     http.request, wait.until_tag_equals))
