"""Timestamps declared as parts: the declaration, its hourly bins, the synthesis view's day and hour attributes,
and the recomposition of any pair of part codes into a valid timestamp inside the declared days."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.schema.time_parts import TimestampColumn
from privsyn_spark.write.decode import Decoder, RowUniforms

VISIT = {"name": "visit", "type": "timestamp", "start": "2024-01-01", "end": "2024-01-14", "parts": ["day", "hour"]}
SCHEMA = parse_schema({"columns": [VISIT, {"name": "kind", "type": "categorical", "values": ["a", "b"]}]})


def test_the_declaration_is_an_hourly_numerical_column_whose_view_holds_day_and_hour():
    column = SCHEMA.column("visit")
    assert isinstance(column, TimestampColumn) and column.dtype == "timestamp"
    start = pd.Timestamp("2024-01-01", tz="UTC").timestamp()
    assert column.edges[0] == start - 0.5 and column.edges[-1] == start + 14 * 86400 - 0.5
    assert column.base_size == 14 * 24 and np.allclose(np.diff(column.edges), 3600)
    assert SCHEMA.view.names == ("visit__day", "visit__hour", "kind")
    assert SCHEMA.view.domain().sizes == (15, 25, 4)  # 14 days and 24 hours, each with the null code
    assert parse_schema(SCHEMA.to_document()) == SCHEMA
    assert SCHEMA.to_document()["columns"][0] == {**VISIT, "dtype": "timestamp", "out_of_range": "clip",
                                                  "nulls": "value"}


def test_a_date_and_a_day_only_timestamp_are_one_attribute_with_a_bin_per_day():
    schema = parse_schema({"columns": [{"name": "d", "type": "timestamp", "dtype": "date", "start": "2024-01-01",
                                        "end": "2024-12-31", "nulls": "none"}]})
    column = schema.column("d")
    assert isinstance(column, TimestampColumn) and column.parts == ("day",) and column.base_size == 366
    assert schema.view.names == ("d",)


@pytest.mark.parametrize("spec, message", [
    ({"parts": ["hour"]}, "parts must be"),
    ({"parts": ["day", "weekday"]}, "parts must be"),
    ({"parts": ["hour", "day"]}, "parts must be"),
    ({"dtype": "date"}, "a date has no hour part"),
    ({"dtype": "int"}, "dtype date or timestamp"),
    ({"end": "2023-12-01"}, "is before start"),
    ({"bins": 4}, "unknown key"),
    ({"start": None}, "start must be"),
])
def test_bad_declarations_are_refused_with_the_column_named(spec, message):
    with pytest.raises(SchemaError, match=message) as err:
        parse_schema({"columns": [{**VISIT, **spec}]})
    assert "visit" in str(err.value)


def test_the_codes_cap_applies_to_each_part_and_no_rule_may_name_a_split_timestamp():
    years = parse_schema({"columns": [{**VISIT, "end": "2031-12-31"}]})  # 2922 days x 24 hours: parts fit
    assert years.view.domain().sizes == (2923, 25)
    with pytest.raises(SchemaError, match="5845 codes"):
        parse_schema({"columns": [{**VISIT, "end": "2039-12-31"}]})
    with pytest.raises(SchemaError, match="timestamp parts"):
        parse_schema({"columns": [VISIT, {"name": "end", "type": "numerical", "dtype": "timestamp",
                                          "min": "2024-01-01", "max": "2024-02-01"}],
                      "rules": [{"type": "inequality", "low": "visit", "high": "end"}]})


def test_any_day_and_hour_codes_decode_to_that_day_and_hour_inside_the_bounds():
    rng = np.random.default_rng(0)
    n = 5000
    day, hour = rng.integers(0, 15, n), rng.integers(0, 25, n)  # the null codes included
    codes = np.column_stack([day, hour, rng.integers(0, 2, n)])
    batch = Decoder(SCHEMA, {}, {}).decode(codes, RowUniforms(1, 0, 0, n))
    assert batch.schema.field("visit").type == pa.timestamp("us", tz="UTC")
    micros = batch.column(0).cast(pa.int64())
    null = (day == 14) | (hour == 24)
    assert micros.is_null().to_numpy(zero_copy_only=False).tolist() == null.tolist()
    start = int(pd.Timestamp("2024-01-01", tz="UTC").timestamp())
    s = micros.drop_null().to_numpy() // 10 ** 6 - start
    assert (s // 86400 == day[~null]).all() and ((s % 86400) // 3600 == hour[~null]).all()
    assert s.min() >= 0 and s.max() < 14 * 86400
    column = SCHEMA.column("visit")
    assert isinstance(column, TimestampColumn)
    code = column.recompose(day, hour)  # back to parts as encode.with_rule_codes splits them in Spark
    back = code // column.hours, np.where(code >= column.base_size, column.hours, code % column.hours)
    assert (back[0] == np.where(null, 14, day)).all() and (back[1] == np.where(null, 24, hour)).all()
