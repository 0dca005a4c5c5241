"""Declared instants as epoch seconds: the one reading of a date or timestamp a person writes (a schema's
bounds and days, ``infer-schema --bounds``).

The timezone rule: a value with an offset (``Z``, ``+01:00``) is that instant; a date or a timestamp without
one is read as UTC, as the encoder reads wall-clock values (``measure/instant_seconds.epoch_seconds``); a date is its
midnight (UTC), or, as the upper end of a declared range (``end``), its last second.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def instant_seconds(value: Any) -> float:
    """Numbers as they are; dates and timestamps (``datetime`` objects or ISO strings) as epoch seconds (UTC
    when naive). Raises ValueError (or TypeError) for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dt.datetime):
        value = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc).timestamp()
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return instant_seconds(dt.datetime.fromisoformat(value))
    raise TypeError(f"not a number or date: {value!r}")


def range_end_seconds(value: Any, end: bool) -> float:
    """One end of a declared range (``end``: the upper one) as epoch seconds: :func:`instant_seconds`, except
    that a date (``2024-12-31``) as the upper end holds its whole day (up to 23:59:59 UTC)."""
    seconds = instant_seconds(value)
    is_date = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            is_date = len(value.strip()) == 10
    return seconds + 86399 if end and is_date else seconds
