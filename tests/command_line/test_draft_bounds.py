"""infer-schema --bounds: numbers, or ISO-8601 dates and timestamps (UTC without an offset; a date as HI holds its
day), read per the column's type; anything else is one line with exit code 2, before Spark starts."""

from __future__ import annotations

import datetime as dt

import pytest

from privsyn_spark.cli import entry as cli
from privsyn_spark.cli.options import draft_bounds
from privsyn_spark.errors import EXIT_USAGE
from privsyn_spark.measure.draft_numeric import declared_bounds
from privsyn_spark.schema.columns import SchemaError

BASE = ["infer-schema", "--input", "table.csv", "--out", "draft.yaml", "--epsilon", "1", "--no-ledger",
        "--master", "bogus://not-a-master"]  # had Spark been started, the error would be another one


def parsed(*bounds: str) -> dict:
    return draft_bounds(cli.build_parser().parse_args([*BASE, *[a for b in bounds for a in ("--bounds", b)]]))


def utc(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize("given, lo, hi", [
    ("2024-01-01:2024-12-31", utc(2024, 1, 1), utc(2024, 12, 31, 23, 59, 59)),  # a date as HI: its whole day
    ("2024-01-01T00:00:00:2024-07-01T12:30:00", utc(2024, 1, 1), utc(2024, 7, 1, 12, 30)),
    ("2024-01-01T00:00:00Z:2024-07-01T00:00:00Z", utc(2024, 1, 1), utc(2024, 7, 1)),
    ("2024-01-01T01:00:00+01:00:2024-02-01", utc(2024, 1, 1), utc(2024, 2, 1, 23, 59, 59)),  # an offset: that instant
    ("1704067200:1735689599", 1704067200.0, 1735689599.0),                                 # epoch seconds
])
def test_timestamp_bounds_take_iso_dates_timestamps_and_numbers(given, lo, hi):
    assert declared_bounds("t", parsed(f"t={given}")["t"], "timestamp") == (lo, hi)


def test_numeric_bounds_stay_numbers_and_refuse_dates():
    assert parsed("age=17:90.5") == {"age": (17.0, 90.5)}
    assert declared_bounds("age", parsed("age=-5:90")["age"], "int") == (-5.0, 90.0)
    with pytest.raises(SchemaError, match=r"--bounds for column 'age' \(int\): expected numbers"):
        declared_bounds("age", parsed("age=2024-01-01:2024-02-01")["age"], "int")


@pytest.mark.parametrize("given", ["t=2024-13-01:2025-01-01", "t=yesterday:today", "t=2024-01-01", "t=1:nan",
                                   "=1:2", "t=2024-02-01:2024-01-01", "t=2024-01-01:2024-01-01T00:00:00"])
def test_bad_bounds_are_one_line_before_spark(given, capsys):
    code = cli.main([*BASE, "--bounds", given])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "--bounds" in err and len(err.splitlines()) == 1, err
