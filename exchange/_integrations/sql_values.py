"""Values in and out of application databases.

Out (rows returned to workflows, stored as JSON step outputs):

==========================  =====================================================================
database value              workflow value
==========================  =====================================================================
NULL                        None
int, str, bool              unchanged
float                       unchanged; NaN and +/-Infinity become the strings "NaN", "Infinity",
                            "-Infinity" (JSON has no such numbers)
Decimal (NUMERIC/DECIMAL)   float by default; ``decimal = "string"`` in the connection's settings
                            gives exact text such as "12.30" instead. NaN/Infinity as text.
datetime, date, time        ISO 8601 text: "2024-05-01T06:30:00", "2024-05-01", "06:30:00"
                            (an offset such as "+02:00" is kept when the database gives one)
timedelta (intervals)       seconds as a float
bytes (BLOB, bytea, ...)    standard base64 text with padding
UUID                        canonical lower-case text
list/tuple (arrays)         list, converted element by element
dict (json/jsonb)           dict, converted value by value
anything else               str(value) (e.g. inet addresses)
==========================  =====================================================================

In (bound parameters): passed to the driver as given, except on SQLite, whose driver knows only
None/int/float/str/bytes: Decimal becomes text, datetime/date/time ISO text (space separator, as
SQLite's date functions expect), UUID text, bool 0/1.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any

DECIMAL_MODES = ("float", "string")


def _non_finite(number: float | Decimal) -> str:
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def to_json_value(value: Any, decimal_mode: str = "float") -> Any:
    """Convert one database value to its JSON-safe workflow value (see the module table)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return _non_finite(value)
        return str(value) if decimal_mode == "string" else float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(v, decimal_mode) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json_value(v, decimal_mode) for k, v in value.items()}
    return str(value)


def to_sqlite_param(value: Any) -> Any:
    """Adapt one bound value for the sqlite3 driver (see the module docstring)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def adapt_params(params: tuple[Any, ...] | dict[str, Any], dialect: str) -> tuple[Any, ...] | dict[str, Any]:
    """The bound values adapted for ``dialect``'s driver; unchanged outside SQLite."""
    if dialect != "sqlite":
        return params
    if isinstance(params, dict):
        return {k: to_sqlite_param(v) for k, v in params.items()}
    return tuple(to_sqlite_param(v) for v in params)
