"""Times as users see them: ISO 8601 in UTC with milliseconds (``2026-11-23T08:01:37.123+00:00``)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat(timespec="milliseconds")
