"""Timestamps declared as parts (``type: timestamp``): the day and the hour of day measured and synthesized as
attributes of their own, recomposed into one value of the declared type on output.

A schema document declares::

    - {name: visit, type: timestamp, dtype: timestamp, start: "2024-01-01", end: "2024-03-31", parts: [day, hour]}

``start`` and ``end`` are public days (UTC), both inclusive. The column is a numerical column with one bin per
hour (``parts: [day]``, and every ``dtype: date``: one bin per day) from ``start`` 00:00:00 to ``end`` 23:59:59,
so reading, clipping, nulls and decoding (a whole second drawn inside the bin) are a numerical column's; only the
synthesis view differs (:mod:`privsyn_spark.schema.synthesis_view`): bin code ``c`` is two attributes, the day
index ``c // 24`` and the hour ``c % 24`` (:class:`PartColumn`; the null code is each part's null code).

Why these parts: every (day, hour) pair is an instant inside the bounds, so recomposition is always valid; the
day of week and the month are functions of the day, so no attribute can contradict them (a measured weekday
beside the day would be a second, possibly conflicting, copy of what the day says). The weekly cycle is in the
day's 1-way marginal, the daily cycle in the hour's, and their pair when selection finds them dependent.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privsyn_spark.schema.columns import Column, NumericalColumn, SchemaError, uniform_edges

PARTS = ("day", "hour")
"""The parts a timestamp may be declared with, in this order; ``day`` always."""
DAY, HOUR = 86400, 3600


@dataclass(frozen=True)
class PartColumn(Column):
    """One part of a timestamp declared with parts: codes ``0 .. count-1`` (day index or hour), then null."""

    source: str = ""
    part: str = ""
    count: int = 0

    kind: ClassVar[str] = "part"

    @property
    def base_size(self) -> int:
        return self.count


@dataclass(frozen=True)
class TimestampColumn(NumericalColumn):
    """A date or timestamp declared with ``parts`` (module docstring): a numerical column with a bin per hour
    (or per day) between its public days."""

    parts: tuple[str, ...] = ("day",)

    @property
    def hours(self) -> int:
        """Bins per day: 24 with an ``hour`` part, else 1."""
        return 24 if "hour" in self.parts else 1

    @property
    def days(self) -> int:
        return self.base_size // self.hours

    @property
    def split(self) -> bool:
        """Whether the synthesis view holds the parts (more than one) instead of the column."""
        return len(self.parts) > 1

    def part_columns(self, taken: set[str]) -> tuple[PartColumn, ...]:
        """The synthesis view's attributes of the parts (names ``<column>__<part>``, not one of ``taken``)."""
        out = []
        for part, count in zip(self.parts, (self.days, self.hours)):
            name = f"{self.name}__{part}"
            while name in taken:
                name += "_"
            out.append(PartColumn(name=name, dtype="int", nulls="value" if self.null_code is not None else "none",
                                  source=self.name, part=part, count=count))
        return tuple(out)

    def recompose(self, day: np.ndarray, hour: np.ndarray) -> np.ndarray:
        """The column's codes of (day, hour) part codes: a null part gives the null code."""
        null = (day >= self.days) | (hour >= self.hours)
        return np.where(null, self.null_code if self.null_code is not None else 0, day * self.hours + hour)

    def to_dict(self) -> dict[str, Any]:
        start = round((self.edges[0] + 0.5) / DAY)
        end = round((self.edges[-1] + 0.5) / DAY) - 1
        return {"name": self.name, "type": "timestamp", "dtype": self.dtype, "start": iso_day(start),
                "end": iso_day(end), "parts": list(self.parts), "out_of_range": self.out_of_range, "nulls": self.nulls}


def iso_day(day: int) -> str:
    """The ISO date of a day index since the epoch."""
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


def timestamp_column(name: str, dtype: str, start: float, end: float, parts: Any, nulls: str,
                     out_of_range: str) -> TimestampColumn:
    """A ``type: timestamp`` declaration (``start``/``end`` as epoch seconds, their days taken) as its column."""
    if dtype not in ("date", "timestamp"):
        raise SchemaError(f"column {name!r}: type timestamp takes dtype date or timestamp, got {dtype!r}")
    parts = parts if parts is not None else (["day", "hour"] if dtype == "timestamp" else ["day"])
    if not isinstance(parts, list) or not parts or parts[0] != "day" or list(parts) != [p for p in PARTS if p in parts]:
        raise SchemaError(f"column {name!r}: parts must be [day] or [day, hour], got {parts!r} (the day of week "
                          f"and the month follow from the day)")
    if dtype == "date" and "hour" in parts:
        raise SchemaError(f"column {name!r}: a date has no hour part; use parts: [day] or dtype: timestamp")
    first, last = int(np.floor(start / DAY)), int(np.floor(end / DAY))
    if last < first:
        raise SchemaError(f"column {name!r}: end ({iso_day(last)}) is before start ({iso_day(first)})")
    step = HOUR if "hour" in parts else DAY
    bins = (last + 1 - first) * DAY // step
    edges = uniform_edges(first * DAY, (last + 1) * DAY - 1, bins, integer=True)
    return TimestampColumn(name=name, dtype=dtype, nulls=nulls, edges=edges, out_of_range=out_of_range,
                           parts=tuple(parts))
