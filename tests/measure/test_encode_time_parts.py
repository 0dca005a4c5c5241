"""A timestamp declared as parts is encoded on the executors into its day index and hour of day: exact against a
pandas reference on small data, for timestamp values and CSV strings alike, nulls and values outside the days."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsyn_spark.measure.encode import STATUS_BITS, encode, with_rule_codes
from privsyn_spark.schema.schema import parse_schema

SCHEMA = parse_schema({"columns": [
    {"name": "t", "type": "timestamp", "start": "2024-01-01", "end": "2024-01-14", "parts": ["day", "hour"]}]})
START = pd.Timestamp("2024-01-01", tz="UTC")


def reference(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Day index and hour (pandas, UTC), clipped to the declared days; nulls at the null codes (14, 24); and
    whether the value was outside the days."""
    seconds = (values - START).dt.total_seconds()
    outside = (seconds < 0) | (seconds >= 14 * 86400)
    clipped = seconds.clip(0, 14 * 86400 - 1)
    day = (clipped // 86400).fillna(14).astype(int).to_numpy()
    hour = np.where(values.isna(), 24, (clipped % 86400) // 3600).astype(int)
    return day, hour, outside.to_numpy()


def encoded_parts(spark, frame: pd.DataFrame) -> pd.DataFrame:
    encoded = with_rule_codes(encode(spark.createDataFrame(frame), SCHEMA))
    assert encoded.columns == ["t__day", "t__hour"] and encoded.domain.sizes == (15, 25)
    return encoded.df.select("t", "t__day", "t__hour").toPandas()


def test_the_parts_of_timestamps_and_of_strings_match_pandas(spark):
    rng = np.random.default_rng(3)
    seconds = rng.integers(-3 * 86400, 17 * 86400, 200)
    values = pd.Series(START + pd.to_timedelta(seconds, "s"))
    values[rng.random(200) < 0.1] = pd.NaT
    day, hour, outside = reference(values)
    strings = values.dt.strftime("%Y-%m-%d %H:%M:%S").where(values.notna(), None)
    for frame in (pd.DataFrame({"t": values}), pd.DataFrame({"t": strings})):
        got = encoded_parts(spark, frame)
        assert (got["t__day"].to_numpy() >> STATUS_BITS).tolist() == day.tolist()
        assert (got["t__hour"].to_numpy() >> STATUS_BITS).tolist() == hour.tolist()
        assert ((got["t__day"] | got["t__hour"]) & 3).eq(0).all()  # the parts carry no status
        assert ((got["t"].to_numpy() & 3) == 1).tolist() == outside.tolist()  # the column does: counted there
