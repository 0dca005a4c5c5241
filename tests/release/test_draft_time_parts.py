"""A private draft proposes a timestamp column as day and hour parts over the days of its drafted range (bins,
with a note, when that range, here declared, is too wide)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.schema_draft import draft_schema_privately
from privsyn_spark.schema.time_parts import TimestampColumn

START = pd.Timestamp("2024-01-01", tz="UTC")


def test_a_timestamp_is_drafted_as_day_and_hour_parts_holding_its_values(spark):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"visit": START + pd.to_timedelta(rng.integers(0, 28 * 86400, 2000), "s"),
                          "amount": rng.integers(0, 100, 2000)})
    df = spark.createDataFrame(frame)
    bounded = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(1),
                                     bounds={"visit": (START.timestamp(), START.timestamp() + 28 * 86400 - 1)})
    assert bounded.document["columns"][0] == {"name": "visit", "type": "timestamp", "dtype": "timestamp",
                                              "start": "2024-01-01", "end": "2024-01-28", "parts": ["day", "hour"],
                                              "out_of_range": "clip", "nulls": "none"}
    assert bounded.document["columns"][1]["type"] == "numerical"  # only timestamps get parts
    assert isinstance(bounded.schema.column("visit"), TimestampColumn)
    drafted = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(2))  # on the calendar grid
    assert drafted.document["columns"][0]["type"] == "timestamp"
    visit = drafted.document["columns"][0]
    assert visit["start"] <= "2024-01-01" and visit["end"] >= "2024-01-28"
    decades = (START.timestamp() - 20 * 365 * 86400, START.timestamp() + 28 * 86400 - 1)
    wide = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(2), bounds={"visit": decades})
    assert wide.document["columns"][0]["type"] == "numerical"
    assert any("'visit': its range spans more than 3660 days" in note for note in wide.notes)
