"""Dates and timestamps as seconds since the epoch, read the same in every session time zone: the one
reading of the encoder and of a draft's counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column as SparkColumn

_OFFSET = (r"[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]*)?)?\s*"   # a time, then its zone: Z, +hh[:mm], a zone id
           r"(Z|[+-][0-9]{1,2}(:?[0-9]{2})?|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*)$")


def epoch_seconds(raw: SparkColumn, source_type: str, dtype: str) -> Any:
    """Seconds since the epoch of a date/timestamp value, whatever the session time zone is.

    Instants (``timestamp`` columns, strings with an offset) keep their instant; wall-clock values
    (``timestamp_ntz``, dates, strings without an offset) are read as UTC, as the schema's bounds
    are. ``dtype`` ``date`` gives the midnight (UTC) of the value's day. Numbers are taken as seconds.
    """
    from pyspark.sql import functions as F

    def wall_clock(ntz: SparkColumn) -> Any:  # a TIMESTAMP_NTZ as if it were UTC (timestamp_diff on NTZ uses no zone)
        return F.timestamp_diff("SECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), ntz)

    if source_type in ("date", "timestamp_ntz"):
        seconds = F.unix_date(raw.cast("date")) * 86400 if dtype == "date" else wall_clock(raw.cast("timestamp_ntz"))
        return seconds.cast("double")
    if source_type == "timestamp":
        seconds = F.unix_seconds(raw)
    elif source_type in ("string", "void"):
        text = F.trim(raw.cast("string"))
        seconds = F.when(text.rlike(_OFFSET), F.unix_seconds(text.try_cast("timestamp"))).otherwise(
            wall_clock(text.try_cast("timestamp_ntz")))
    else:
        seconds = raw.try_cast("double")
    if dtype == "date":
        seconds = F.floor(seconds / 86400) * 86400
    return seconds.cast("double")
