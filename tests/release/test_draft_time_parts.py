"""A private draft proposes a timestamp column as day and hour parts over the days of its drafted range (bins,
with a note, when that range is too wide)."""

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
    wide = draft_schema_privately(df, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(2))  # drafted in 1900..2100
    assert wide.document["columns"][0]["type"] == "numerical"
    assert any("'visit': its range spans more than 3660 days" in note for note in wide.notes)
