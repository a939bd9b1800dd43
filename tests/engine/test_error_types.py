"""What a run's and a step's ``error.type`` hold, as docs/authoring.md ("What error.type holds")
says: the class name for Exchange's own errors (in a run) and Python's built-ins, the
module-qualified name for any other class, ``Cancelled`` for a cancelled run. Consumers match on
these strings, so they are pinned here."""

from __future__ import annotations

from typing import Any

import pytest

from exchange.errors import FatalError
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from tests.engine.conftest import Engine

HERE = __name__  # tests.engine.test_error_types


class DoseTimeout(Exception):
    """An app's own exception."""


@step(name="errtype.own")
def own_step() -> None:
    raise DoseTimeout("pump P-7 slow")


@step(name="errtype.builtin")
def builtin_step() -> None:
    raise KeyError("recipe")


@step(name="errtype.exchange")
def exchange_step() -> None:
    raise FatalError("MES refused")


@workflow(name="errtype.run")
def failing(kind: str) -> None:
    {"own": own_step, "builtin": builtin_step, "exchange": exchange_step}.get(kind, _local)()


def _local() -> None:
    class Late(Exception):
        pass

    raise Late("too late")


@workflow(name="errtype.waits")
def waits() -> None:
    getWorkflows().recvCommand(timeoutSeconds=30)


@pytest.mark.parametrize(
    ("kind", "run_type", "step_type"),
    [
        ("own", f"{HERE}.DoseTimeout", f"{HERE}.DoseTimeout"),
        ("builtin", "KeyError", "KeyError"),
        ("exchange", "FatalError", "exchange.errors.FatalError"),
        ("local", f"{HERE}._local.<locals>.Late", None),
    ],
)
def test_error_type_is_as_documented(sqlite_engine: Engine, kind: str, run_type: str, step_type: str | None) -> None:
    runtime = sqlite_engine.runtime
    view: Any = runtime.wait_for(runtime.start("errtype.run", {"kind": kind}), 20)
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == run_type
    if step_type is not None:
        assert [s["error"]["type"] for s in view["steps"]] == [step_type]


def test_a_cancelled_run_says_cancelled_with_the_reason(sqlite_engine: Engine) -> None:
    runtime = sqlite_engine.runtime
    run_id = runtime.start("errtype.waits")
    runtime.cancel(run_id, "batch withdrawn")
    view: Any = runtime.wait_for(run_id, 20)
    assert (view["status"], view["error"]) == ("CANCELLED", {"type": "Cancelled", "message": "batch withdrawn"})
