"""Encoding and decoding dates and timestamps do not depend on the session time zone."""

import datetime as dt

import numpy as np
import pytest
from pyspark.sql import functions as F

from privsyn_spark.evaluate.codes import unpacked_codes
from privsyn_spark.measure.encode import encode
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.write.decode import decode_dataframe

UTC = dt.timezone.utc
INSTANT = dt.datetime(2020, 3, 1, 23, 30, tzinfo=UTC)   # 1583105400
ZONES = ("UTC", "America/Los_Angeles", "Asia/Kolkata")


def _column(name, dtype, lo, hi, bins):
    return {"name": name, "type": "numerical", "dtype": dtype, "min": lo, "max": hi, "bins": bins}


SCHEMA = parse_schema({"columns": [
    _column("s", "timestamp", "2020-02-28", "2020-03-04", 120),   # string, no offset: UTC wall clock
    _column("o", "timestamp", "2020-02-28", "2020-03-04", 120),   # string with an offset: that instant
    _column("t", "timestamp", "2020-02-28", "2020-03-04", 120),   # TIMESTAMP: an instant
    _column("n", "timestamp", "2020-02-28", "2020-03-04", 120),   # TIMESTAMP_NTZ: UTC wall clock
    _column("td", "date", "2020-02-20", "2020-03-10", 20),        # TIMESTAMP as a date: its UTC day
    _column("d", "date", "2020-02-20", "2020-03-10", 20),         # DATE
    _column("ds", "date", "2020-02-20", "2020-03-10", 20),        # date string
]})
SECONDS = {"s": 1583105400, "o": 1583105400 - 5 * 3600, "t": 1583105400, "n": 1583105400,
           "td": 1583020800, "d": 1583020800, "ds": 1583020800}


@pytest.fixture
def session_zone(spark):
    """Sets the test session's time zone; restores the previous one afterwards."""
    before = spark.conf.get("spark.sql.session.timeZone")

    def set_zone(zone):
        spark.conf.set("spark.sql.session.timeZone", zone)

    yield set_zone
    spark.conf.set("spark.sql.session.timeZone", before)


def _table(spark):
    row = ("2020-03-01 23:30:00", "2020-03-02T04:30:00+10:00", INSTANT, INSTANT.replace(tzinfo=None),
           INSTANT, dt.date(2020, 3, 1), "2020-03-01")
    return spark.createDataFrame([row], "s string, o string, t timestamp, n timestamp_ntz, td timestamp, "
                                        "d date, ds string")


def test_codes_are_the_same_in_every_session_time_zone(spark, session_zone):
    expected = {}
    for column in SCHEMA.columns:  # the bin of each value's epoch seconds (brute force over the edges)
        edges = column.edge_array()
        expected[column.name] = int(np.searchsorted(edges, SECONDS[column.name], side="right") - 1)
    df = _table(spark)  # built once, in the fixture's zone: a row of fixed instants and wall clocks
    for zone in ZONES:
        session_zone(zone)
        codes = unpacked_codes(encode(df, SCHEMA)).first().asDict()
        assert codes == expected, zone


def test_decoded_values_are_the_same_in_every_session_time_zone(spark, session_zone):
    codes = spark.createDataFrame([(i % 120, i % 120, i % 120, i % 120, i % 20, i % 20, i % 20) for i in range(200)],
                                  ", ".join(f"{c} int" for c in SCHEMA.names)).repartition(1)
    maps = {c.name: np.arange(c.size) for c in SCHEMA.columns}
    ones = {c.name: np.ones(c.size) for c in SCHEMA.columns}
    seen = []
    for zone in ZONES:
        session_zone(zone)
        decoded = decode_dataframe(codes, SCHEMA, maps, ones, seed=5)
        rows = decoded.select(*[F.unix_seconds(c).alias(c) if c in ("s", "o", "t", "n") else
                                (F.unix_date(c) * 86400).alias(c) for c in SCHEMA.names]).collect()
        seen.append(sorted(tuple(r) for r in rows))
    assert seen[0] == seen[1] == seen[2]
    for j, column in enumerate(SCHEMA.columns):  # and every value lies inside the bounds (UTC)
        values = np.array([r[j] for r in seen[0]], dtype=float)
        assert column.edges[0] <= values.min() and values.max() <= column.edges[-1] + 86400, column.name


def test_a_draft_counts_dates_and_timestamps_as_the_encoder_reads_them_in_every_zone(spark, session_zone):
    from privsyn_spark.measure.draft_counts import grid_counts

    df = _table(spark).drop("o")  # an offset string is an instant: its seconds do not move with the zone either
    starts = np.asarray([SECONDS["s"] - 86400, SECONDS["s"], SECONDS["s"] + 1], dtype=np.float64)
    grids = {c: (starts, starts[0] - 9 * 86400, starts[-1] + 9 * 86400, True) for c in df.columns}
    for zone in ZONES:
        session_zone(zone)
        counts = grid_counts(df, grids, ())
        for c in ("s", "t", "n", "td"):  # the instant's cell: [SECONDS, SECONDS + 1)
            assert counts[c][0].tolist() == [0, 1, 0], (zone, c)
        for c in ("d", "ds"):  # a date: the midnight (UTC) of its day, in the cell before
            assert counts[c][0].tolist() == [1, 0, 0], (zone, c)
