"""The public grid of a drafted date or timestamp column: calendar quarters, months and weeks of epoch seconds.

A geometric grid is fine for amounts, whose scale is unknown, but an instant's magnitude says nothing of its
spread: near 2024 an octave of epoch seconds is 34 years, so a range drafted on it spans decades. The calendar
grid has the geometric grid's three levels (:class:`~privsyn_spark.privacy.discovery.GeometricGrid`) at a fixed
resolution instead: **groups** are calendar quarters, **octaves** calendar months, **cells** the days 1, 8, 15 and
22 of each month (UTC). A group holds a few octaves, as a geometric group does: the range's outermost octave is
sought inside the outermost occupied group, so a longer group (a year) would let an empty month's noise pass in it
more often. The same hierarchical release (``discovery.release_numeric``), range and bins
(``privacy.draft_range``) and outside count (``discovery.release_outside``) run on it unchanged, so a drafted range
reaches the outermost occupied month, plus the walk and the one month of margin: a few months wider than the
values, whatever their epoch.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_spark.privacy.discovery import GeometricGrid

#: Days of the month (from 0) where the cells of a month start: four cells of about a week.
CELL_DAYS = (0, 7, 14, 21)


def calendar_grid(lower: float, upper: float) -> GeometricGrid:
    """The grid of whole epoch seconds ``[lower, upper]`` (public bounds): cells at :data:`CELL_DAYS` of each month,
    months as octaves, quarters as groups (module docstring); the first cell starts at ``lower``."""
    lower, upper = float(math.ceil(lower)), float(math.floor(upper))
    if not lower <= upper:
        raise ValueError(f"calendar_grid: lower {lower} above upper {upper}")
    first, last = (np.datetime64(int(v), "s").astype("datetime64[M]") for v in (lower, upper))
    months = np.arange(first, last + 1)
    days = months.astype("datetime64[D]")[:, None] + np.asarray(CELL_DAYS, dtype="timedelta64[D]")[None, :]
    seconds = days.ravel().astype("datetime64[s]").astype(np.int64).astype(np.float64)
    starts = np.concatenate([[lower], seconds[(seconds > lower) & (seconds <= upper)]])
    stamps = starts.astype(np.int64).astype("datetime64[s]")
    month = stamps.astype("datetime64[M]").astype(np.int64)
    quarter = month // 3  # months count from 1970-01: quarters are calendar quarters
    width = (np.append(starts[1:], upper + 1) - starts).astype(np.int64)
    return GeometricGrid(lower, upper, True, starts, month - month[0], quarter - quarter[0], width)
