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
    unseen_value = _packed(column.other_code or 0, STATUS_OUT_OF_DOMAIN)
    null_value = _null_value(column, unseen_value)
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


def _null_value(column: Column, out_of_domain_value: int) -> int:
    """Packed code of a null: its own code (``value``), a failure (``fail``), or out of domain (``none``)."""
    if column.nulls == "none":
        return out_of_domain_value
    return _packed(column.null_code or 0, STATUS_NULL if column.nulls == "fail" else STATUS_OK)


def _as_number(raw, column: NumericalColumn):
    """Numbers as doubles; dates and timestamps as seconds since the epoch (UTC)."""
    from pyspark.sql import functions as F

    if column.dtype in ("date", "timestamp"):
        return F.unix_timestamp(raw.try_cast("timestamp")).cast("double")
    return raw.try_cast("double")


def _numerical(raw, column: NumericalColumn):
    """``code * 4 + status`` of a numerical column: the bin index, clipped to the edge bins."""
    from pyspark.sql import functions as F

    x = _as_number(raw, column)
    edges = column.edge_array()
    bins = len(edges) - 1
    widths = np.diff(edges)
    if np.allclose(widths, widths[0], rtol=1e-12, atol=0):
        index = F.floor((x - F.lit(edges[0])) / F.lit(widths[0]))
    else:
        index = sum((F.when(x >= F.lit(e), 1).otherwise(0) for e in edges[1:-1]), F.lit(0))
    clipped = F.least(F.greatest(index.cast("int"), F.lit(0)), F.lit(bins - 1)) * (1 << STATUS_BITS)
    inside = (x >= F.lit(edges[0])) & (x <= F.lit(edges[-1]))  # false for NaN, null for null
    null_value = _null_value(column, _packed(0, STATUS_OUT_OF_DOMAIN))
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
    columns = []
    for column in schema.columns:
        raw = _raw(schema, column)
        value = _categorical(raw, column) if isinstance(column, CategoricalColumn) else _numerical(raw, column)
        kind = "smallint" if (column.size << STATUS_BITS) < 2 ** 15 else "int"
        columns.append(value.cast(kind).alias(column.name))
    return EncodedTable(df.select(*columns), schema, schema.domain())
