"""Shared by the units tests: the in-process engine of the step tests."""

from __future__ import annotations

from tests.steps.conftest import make_engine  # noqa: F401
