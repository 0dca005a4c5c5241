"""A private draft of dates and timestamps without declared bounds drafts a range close to the values (the
calendar grid: months as octaves), not one spanning decades, and states it in ISO form in the header."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.privacy.calendar_grid import calendar_grid
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.schema_draft import draft_schema_privately

START = pd.Timestamp("2023-03-10", tz="UTC")
SPAN = 730 * 86400  # about two years of seconds
ROWS = 5000
DRAFT_SEEDS = 10


@pytest.fixture(scope="module")
def visits(spark):
    """Epoch seconds of a timestamp spread over two years (busier in the second) and of its day (a date column),
    with the cached Spark table of both."""
    rng = np.random.default_rng(7)
    busy = rng.integers(SPAN // 2, SPAN, ROWS - ROWS // 3)
    offsets = np.sort(np.concatenate([rng.integers(0, SPAN, ROWS // 3), busy]))
    stamps = START + pd.to_timedelta(offsets, "s")
    frame = pd.DataFrame({"visit": stamps, "day": stamps.tz_convert(None).normalize().date})
    seconds = {"visit": stamps.astype("int64").to_numpy() // 10 ** 9,
               "day": stamps.tz_convert(None).normalize().astype("int64").to_numpy() // 10 ** 9}
    df = spark.createDataFrame(frame).cache()
    yield seconds, df
    df.unpersist()


def epoch(text: str) -> float:
    """A header's range end (ISO date or UTC timestamp) as epoch seconds."""
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    value = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
    return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()


def test_the_calendar_grid_has_weeks_in_months_in_quarters():
    grid = calendar_grid(epoch("2023-12-20"), epoch("2024-04-10") - 1)
    assert [dt.datetime.fromtimestamp(s, dt.timezone.utc).strftime("%m-%d") for s in grid.starts] == \
        ["12-20", "12-22", "01-01", "01-08", "01-15", "01-22", "02-01", "02-08", "02-15", "02-22", "03-01", "03-08",
         "03-15", "03-22", "04-01", "04-08"]
    assert grid.octave.tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4]
    assert grid.group.tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]
    assert grid.width.sum() == grid.upper - grid.lower + 1 and grid.integer


@pytest.mark.slow
def test_drafted_time_ranges_hold_the_values_and_stay_near_their_span(visits):
    seconds, df = visits
    for seed in range(DRAFT_SEEDS):
        draft = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(seed))
        header = draft.header()
        for name, values in seconds.items():
            lo, hi = (epoch(v) for v in draft.outside[name]["range"])
            covered = np.mean((values >= lo) & (values <= hi))
            true_span = values.max() - values.min()
            assert covered >= 0.99, (seed, name, draft.outside[name], covered)
            assert hi - lo <= 2 * true_span, (seed, name, draft.outside[name])
            assert f"column {name!r}: range [{draft.outside[name]['range'][0]}, " in header
        assert draft.document["columns"][0]["type"] == "timestamp"  # within ten years: day and hour parts
        assert draft.document["columns"][0]["start"] == draft.outside["visit"]["range"][0][:10]


def test_a_drafted_timestamp_range_is_stated_in_iso_form(visits):
    _, df = visits
    draft = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(3))
    visit, day = draft.outside["visit"]["range"], draft.outside["day"]["range"]
    assert visit[0].endswith("T00:00:00Z") and visit[1].endswith("T23:59:59Z")
    assert len(day[0]) == len(day[1]) == 10  # dates: YYYY-MM-DD
    assert "'visit': no declared bounds; its range was drafted inside [1900-01-01T00:00:00Z, " \
           "2100-01-01T00:00:00Z] (timestamp)" in draft.header()
    assert draft.record()["outside_range"]["day"]["range"] == day
