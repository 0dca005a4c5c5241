"""Encoding on the executors: each row becomes integer codes, with Spark expressions only.

Each kept column becomes one small integer column holding ``code * 4 + status`` (status: 0 in
domain, 1 outside the declared domain, 2 a null where nulls fail), typed ``smallint`` or ``int``
by the column's size. Each column's lookup is evaluated once per row (it leads its CASE, so
Spark's subexpression elimination shares it); contiguous integer categories use arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn
from privsyn_spark.schema.schema import Schema

STATUS_OK, STATUS_OUT_OF_DOMAIN, STATUS_NULL = 0, 1, 2
STATUS_BITS = 2


@dataclass(frozen=True)
class EncodedTable:
    """A DataFrame with one ``code * 4 + status`` column per kept column (same names), and the domain."""

    df: object  # pyspark.sql.DataFrame
    schema: Schema
    domain: Domain

    @property
    def columns(self) -> list[str]:
        return list(self.domain.attrs)


def code_column(df, name: str):
    """Spark expression of the code alone of an encoded column."""
    from pyspark.sql import functions as F

    return F.shiftright(F.col(f"`{name}`"), STATUS_BITS)


def spark_type(dtype: str) -> str:
    """The Spark SQL type of a schema dtype."""
    return {"string": "string", "int": "int", "long": "bigint", "double": "double", "float": "float",
            "boolean": "boolean", "date": "date", "timestamp": "timestamp"}[dtype]


def _raw(schema: Schema, column: Column):
    """The column with the schema's null tokens turned into nulls."""
    from pyspark.sql import functions as F

    col = F.col(f"`{column.name}`")
    if schema.null_tokens:
        col = F.when(F.trim(col.cast("string")).isin(*schema.null_tokens), F.lit(None)).otherwise(col)
    return col


def _categorical(raw, column: CategoricalColumn):
    """``code * 4 + status`` of a categorical column.

    The category lookup (``array_position``, the costly part) comes first in the CASE so Spark's
    subexpression elimination evaluates it once per row.
    """
    from pyspark.sql import functions as F

    typed = raw.try_cast(spark_type(column.dtype)) if column.dtype != "string" else F.trim(raw.cast("string"))
    null_value = _packed(column.null_code or 0, STATUS_NULL if column.nulls == "fail" else STATUS_OK)
    unseen_value = _packed(column.other_code or 0, STATUS_OUT_OF_DOMAIN)
    first = column.values[0]
    if column.dtype in ("int", "long") and list(column.values) == list(range(first, first + len(column.values))):
        # a contiguous integer range: arithmetic instead of a lookup
        found, code = (typed >= first) & (typed < first + len(column.values)), typed - first
    else:
        values = F.array(*[F.lit(v).cast(spark_type(column.dtype)) for v in column.values])
        position = F.array_position(values, typed)  # 1-based; 0 when absent; null when typed is null
        found, code = position > 0, position - 1
    return (F.when(found, code * (1 << STATUS_BITS))
            .when(raw.isNull(), F.lit(null_value))
            .otherwise(F.lit(unseen_value)))


def _packed(code: int, status: int) -> int:
    return (code << STATUS_BITS) + status


_OFFSET = (r"[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]*)?)?\s*"   # a time, then its zone: Z, +hh[:mm], a zone id
           r"(Z|[+-][0-9]{1,2}(:?[0-9]{2})?|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*)$")


def epoch_seconds(raw, source_type: str, dtype: str):
    """Seconds since the epoch of a date/timestamp value, whatever the session time zone is.

    Instants (``timestamp`` columns, strings with an offset) keep their instant; wall-clock values
    (``timestamp_ntz``, dates, strings without an offset) are read as UTC, as the schema's bounds
    are. ``dtype`` ``date`` gives the midnight (UTC) of the value's day. Numbers are taken as seconds.
    """
    from pyspark.sql import functions as F

    def wall_clock(ntz):  # a TIMESTAMP_NTZ as if it were UTC (timestamp_diff on NTZ uses no zone)
        return F.timestamp_diff("SECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), ntz)

    if source_type in ("date", "timestamp_ntz"):
        seconds = F.unix_date(raw.cast("date")) * 86400 if dtype == "date" else wall_clock(raw.cast("timestamp_ntz"))
        return seconds.cast("double")
    if source_type == "timestamp":
        seconds = F.unix_seconds(raw)
    elif source_type in ("string", "void"):
        text = F.trim(raw.cast("string"))
        seconds = F.when(text.rlike(_OFFSET), F.unix_seconds(text.try_cast("timestamp"))).otherwise(
            wall_clock(text.try_cast("timestamp_ntz")))
    else:
        seconds = raw.try_cast("double")
    if dtype == "date":
        seconds = F.floor(seconds / 86400) * 86400
    return seconds.cast("double")


def _numerical(raw, column: NumericalColumn, source_type: str):
    """``code * 4 + status`` of a numerical column: the bin index, clipped to the edge bins."""
    from pyspark.sql import functions as F

    x = (epoch_seconds(raw, source_type, column.dtype) if column.dtype in ("date", "timestamp")
         else raw.try_cast("double"))
    edges = column.edge_array()
    bins = len(edges) - 1
    widths = np.diff(edges)
    if np.allclose(widths, widths[0], rtol=1e-12, atol=0):
        index = F.floor((x - F.lit(edges[0])) / F.lit(widths[0]))
    else:
        index = sum((F.when(x >= F.lit(e), 1).otherwise(0) for e in edges[1:-1]), F.lit(0))
    clipped = F.least(F.greatest(index.cast("int"), F.lit(0)), F.lit(bins - 1)) * (1 << STATUS_BITS)
    inside = (x >= F.lit(edges[0])) & (x <= F.lit(edges[-1]))  # false for NaN, null for null
    null_value = _packed(column.null_code or 0, STATUS_NULL if column.nulls == "fail" else STATUS_OK)
    return (F.when(inside, clipped)
            .when(raw.isNull(), F.lit(null_value))
            .when(x.isNull() | F.isnan(x), F.lit(_packed(0, STATUS_OUT_OF_DOMAIN)))
            .otherwise(clipped + STATUS_OUT_OF_DOMAIN))


def encode(df, schema: Schema) -> EncodedTable:
    """Encode ``df`` against ``schema`` (lazy: nothing runs yet).

    Values that cannot be parsed as the declared type count as outside the domain, like
    unseen categories and out-of-range numbers. Unparseable numbers and NaN go to the first bin
    (they cannot be clipped) and are counted as out of range.
    """
    schema.check_table_columns(df.columns)
    types = dict(df.dtypes)
    columns = []
    for column in schema.columns:
        raw = _raw(schema, column)
        value = (_categorical(raw, column) if isinstance(column, CategoricalColumn)
                 else _numerical(raw, column, types[column.name]))
        kind = "smallint" if (column.size << STATUS_BITS) < 2 ** 15 else "int"
        columns.append(value.cast(kind).alias(column.name))
    return EncodedTable(df.select(*columns), schema, schema.domain())
