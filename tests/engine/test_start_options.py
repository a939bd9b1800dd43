"""StartOptions: the start keywords parsed once into a typed value, refused with the messages starts
have always given (InvalidParams naming the option), and in the same order against the parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._engine.definition.registry import Registry
from exchange._engine.operator.runtime import Runtime
from exchange._engine.operator.start_options import (
    PRIORITY_MAX,
    PRIORITY_MIN,
    START_OPTIONS,
    StartKeywords,
    StartOptions,
)
from exchange.errors import InvalidParams, UnknownWorkflow


def test_nothing_given_is_every_default() -> None:
    assert StartOptions.parse({}) == StartOptions(None, None, 0, None, None, None)


def test_the_camel_case_keywords_become_the_snake_case_fields() -> None:
    options = StartOptions.parse({"queue": "lab", "partitionKey": 7, "priority": -3, "deduplicationId": "batch-42",
                                  "timeoutSeconds": 30, "actor": "ana@line1"})
    assert options == StartOptions(queue="lab", partition_key="7", priority=-3, deduplication_id="batch-42",
                                   timeout_seconds=30.0, actor="ana@line1")
    assert isinstance(options.timeout_seconds, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.priority = 1  # type: ignore[misc]


def test_the_keywords_are_the_typed_dict_s() -> None:
    assert set(START_OPTIONS) == set(StartKeywords.__annotations__)


@pytest.mark.parametrize(("keywords", "message"), [
    ({"bogus": 1, "Queue": "x"},
     "unknown start option(s) Queue, bogus (known: queue, partitionKey, priority, deduplicationId, timeoutSeconds, "
     "actor)"),
    ({"queue": 5.5}, "start: queue must be a string, got 5.5"),
    ({"partitionKey": "k" * 201}, "start: partitionKey is 201 characters long; the limit is 200"),
    ({"deduplicationId": "a\x00b"}, "start: deduplicationId holds a NUL byte at position 1: 'a\\x00b'"),
    ({"actor": True}, "start: actor must be a string, got True"),
    ({"timeoutSeconds": 0}, "start: timeoutSeconds must be a positive finite number, got 0"),
    ({"timeoutSeconds": float("nan")}, "start: timeoutSeconds must be a positive finite number, got nan"),
    ({"timeoutSeconds": True}, "start: timeoutSeconds must be a positive finite number, got True"),
    ({"priority": None}, f"start: priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got None"),
    ({"priority": 2**31}, f"start: priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, "
                          f"got {2**31}"),
    ({"priority": 1.0}, f"start: priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got 1.0"),
])
def test_a_bad_option_is_refused_naming_it(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        StartOptions.parse(keywords)
    assert str(refused.value) == message


def test_the_text_options_are_checked_before_the_numbers() -> None:
    with pytest.raises(InvalidParams, match="^start: queue "):
        StartOptions.parse({"priority": "high", "timeoutSeconds": -1, "queue": 1.5})


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    config = config_from_dict({"store": {"url": f"sqlite:///{tmp_path / 'exchange.db'}"}}, base_dir=tmp_path)
    runtime = Runtime(config, registry=Registry())
    yield runtime
    runtime.close()


def test_an_unknown_option_is_refused_before_the_workflow_and_a_bad_one_after(runtime: Runtime) -> None:
    with pytest.raises(InvalidParams, match="^unknown start option"):
        runtime.start("no.such.workflow", {}, bogus=1)  # type: ignore[call-arg]
    with pytest.raises(UnknownWorkflow):
        runtime.start("no.such.workflow", {}, priority="high")  # type: ignore[typeddict-item]
    with pytest.raises(InvalidParams, match="^unknown start option"):
        runtime.create_run("no.such.workflow", {}, bogus=1)  # type: ignore[call-arg]
