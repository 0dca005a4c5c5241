"""Partitioned Delta tables of the bundled Adult sample (a `day` partition column) for the partition tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from privsyn_spark.api import SAMPLE_DATA, SAMPLE_SCHEMA

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
ROWS_PER_DAY = 1500


def write_days(spark, path: Path, days=DAYS, rows: int = ROWS_PER_DAY, fmt: str = "delta") -> Path:
    """The first ``rows * len(days)`` Adult rows, ``rows`` a day, as a table partitioned by ``day`` (a date)."""
    import pandas as pd

    frame = pd.read_csv(SAMPLE_DATA, nrows=rows * len(days))
    frame["day"] = pd.to_datetime(pd.Series(days).repeat(rows).to_numpy()).date
    df = spark.createDataFrame(frame).repartition(2)
    df.write.format(fmt).partitionBy("day").mode("overwrite").save(str(path))
    return path


@pytest.fixture(scope="module")
def daily(spark, tmp_path_factory) -> Path:
    """A Delta table of 3 daily partitions (read-only for the tests: copy it to change it)."""
    return write_days(spark, tmp_path_factory.mktemp("daily") / "events")


def run_args(table: Path, work: Path, *extra: str, epsilon: float = 1.0) -> list[str]:
    """`privsyn-spark run` arguments on ``table`` (no evaluation, small synthesis) writing under ``work``."""
    return ["run", "--input", str(table), "--schema", SAMPLE_SCHEMA, "--output", str(work / "synthetic"),
            "--runs-dir", str(work / "runs"), "--epsilon", str(epsilon), "--no-evaluate", "--rows", "300",
            "--master", "local[2]", *extra]
