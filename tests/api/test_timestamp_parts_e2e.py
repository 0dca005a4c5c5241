"""A timestamp declared as parts (day, hour) keeps its daily and weekly cycles: fit and sample on a generated
column with strong cycles; the synthetic hour-of-day and day-of-week histograms stay within a TVD bound of the
real ones, the output is a timestamp column inside the declared days."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from privsyn_spark import PrivSyn
from privsyn_spark.schema.schema import parse_schema

pytestmark = pytest.mark.slow

N = 6000
START = pd.Timestamp("2024-01-01", tz="UTC")  # a Monday
DAYS = 56
SCHEMA = parse_schema({"columns": [
    {"name": "visit", "type": "timestamp", "start": "2024-01-01", "end": "2024-02-25", "parts": ["day", "hour"]},
    {"name": "kind", "type": "categorical", "values": ["a", "b", "c"]}]})
WEEKDAY = np.asarray([3, 3, 3, 3, 3, 1, 1]) / 17                      # weekdays three times the weekend
HOUR = np.r_[np.full(7, 1), np.full(11, 6), np.full(6, 3)] / 91.0    # nights quiet, working hours busy
TVD_BOUND = 0.06


def generated(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    day = rng.choice(DAYS, N, p=np.tile(WEEKDAY, DAYS // 7) / (DAYS // 7))
    seconds = day * 86400 + rng.choice(24, N, p=HOUR) * 3600 + rng.integers(0, 3600, N)
    return pd.DataFrame({"visit": START + pd.to_timedelta(seconds, "s"), "kind": rng.choice(["a", "b", "c"], N)})


def cycles(seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hour-of-day and day-of-week shares (UTC) of epoch seconds."""
    hour = np.bincount((seconds % 86400) // 3600, minlength=24) / len(seconds)
    weekday = np.bincount((seconds // 86400 + 3) % 7, minlength=7) / len(seconds)  # 1970-01-01: a Thursday
    return hour, weekday


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return float(0.5 * np.abs(p - q).sum())


def test_daily_and_weekly_cycles_survive_and_the_output_is_a_timestamp_inside_the_days(spark, tmp_path):
    frame = generated()
    real_seconds = ((frame["visit"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds()).astype(np.int64).to_numpy()
    real_hour, real_weekday = cycles(real_seconds)
    assert tvd(real_hour, np.full(24, 1 / 24)) > 0.2 and tvd(real_weekday, np.full(7, 1 / 7)) > 0.15  # strong
    model = PrivSyn(SCHEMA, epsilon=1.0, no_ledger=True, runs_dir=str(tmp_path), run_id="ts").fit(
        spark.createDataFrame(frame))
    out = model.sample(N, seed=0)
    assert dict(out.dtypes)["visit"] == "timestamp"
    seconds = np.asarray(out.select(F.unix_seconds("visit").alias("s")).where("s is not null").toPandas()["s"])
    assert len(seconds) > 0.95 * N
    start = int(START.timestamp())
    assert seconds.min() >= start and seconds.max() < start + DAYS * 86400
    hour, weekday = cycles(seconds)
    assert tvd(hour, real_hour) < TVD_BOUND and tvd(weekday, real_weekday) < TVD_BOUND
