"""Encoding on the executors: each row becomes integer codes, with Spark expressions only.

Each kept column becomes one small integer column holding ``code * 4 + status`` (status: 0 in
domain, 1 outside the declared domain, 2 a null where nulls fail, 3 a number that is NaN or does not
parse; the counters tally 1, 2 and 3 per column: :data:`TALLIED_STATUSES`), typed ``smallint`` or ``int``
by the column's size. Each column's lookup is evaluated once per row (it leads its CASE, so
Spark's subexpression elimination shares it); contiguous integer categories use arithmetic.

Declared category lists reach Spark as one literal each (a split string), never one expression
per value: building a plan costs the same for 10 or 100,000 values. Up to ``LOOKUP_JOIN_ABOVE``
values the lookup scans that array per row; larger lists are looked up with a broadcast hash join
on a (value, code) table, so the cost per row does not grow with the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.measure.draft_counts import cleaned
from privsyn_spark.measure.instant_seconds import epoch_seconds
from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn
from privsyn_spark.schema.schema import Schema
from privsyn_spark.schema.time_parts import TimestampColumn

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

STATUS_OK, STATUS_OUT_OF_DOMAIN, STATUS_NULL, STATUS_NOT_A_NUMBER = 0, 1, 2, 3
STATUS_BITS = 2
TALLIED_STATUSES = (STATUS_OUT_OF_DOMAIN, STATUS_NULL, STATUS_NOT_A_NUMBER)
"""The statuses a counting pass tallies per column, in the order of its tallies (after the row count)."""
LOOKUP_JOIN_ABOVE = 1000
"""Categorical columns with more declared values than this are encoded with a broadcast join."""
_SEPARATORS = ("\x1f", "\x1e", "\x1d", "\x01")


@dataclass(frozen=True)
class EncodedTable:
    """A DataFrame with one ``code * 4 + status`` column per kept column (same names), and the domain."""

    df: DataFrame
    schema: Schema
    domain: Domain
    extra: tuple[Column, ...] = ()
    """Columns of the synthesis domain beyond the schema's (the rules' compound attributes, the timestamps'
    parts), also in ``df``."""

    @property
    def columns(self) -> list[str]:
        return list(self.domain.attrs)


def code_column(df: DataFrame, name: str) -> Any:
    """Spark expression of the code alone of an encoded column."""
    from pyspark.sql import functions as F

    return F.shiftright(F.col(f"`{name}`"), STATUS_BITS)


def spark_type(dtype: str) -> str:
    """The Spark SQL type of a schema dtype."""
    return {"string": "string", "int": "int", "long": "bigint", "double": "double", "float": "float",
            "boolean": "boolean", "date": "date", "timestamp": "timestamp"}[dtype]


def raw_value(schema: Schema, column: Column) -> Any:
    """The column with the schema's null tokens turned into nulls."""
    return cleaned(column.name, schema.null_tokens)


def _typed(raw: SparkColumn, column: CategoricalColumn) -> Any:
    """The raw value as the column's dtype (null when it does not parse); strings trimmed."""
    from pyspark.sql import functions as F

    return raw.try_cast(spark_type(column.dtype)) if column.dtype != "string" else F.trim(raw.cast("string"))


def _contiguous(column: CategoricalColumn) -> bool:
    first = column.values[0]
    return column.dtype in ("int", "long") and list(column.values) == list(range(first, first + len(column.values)))


def _value_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, float) else str(value)


def _value_array(column: CategoricalColumn) -> Any:
    """The declared values as one array literal (one split string, cast to the dtype; constant-folded)."""
    import re

    from pyspark.sql import functions as F

    texts = [_value_text(v) for v in column.values]
    sep = next((c for c in _SEPARATORS if not any(c in t for t in texts)), None)
    if sep is None:  # every separator occurs in some value: one literal per value
        return F.array(*[F.lit(v).cast(spark_type(column.dtype)) for v in column.values])
    array = F.split(F.lit(sep.join(texts)), re.escape(sep))
    return array if column.dtype == "string" else array.cast(f"array<{spark_type(column.dtype)}>")


def _lookup_table(spark: SparkSession, column: CategoricalColumn, value_name: str, code_name: str) -> Any:
    """A (value, code) DataFrame of the declared values, for the broadcast-join lookup."""
    import pandas as pd

    frame = pd.DataFrame({value_name: list(column.values), code_name: range(len(column.values))})
    return spark.createDataFrame(frame, f"`{value_name}` {spark_type(column.dtype)}, `{code_name}` int")


def _categorical(raw: SparkColumn, column: CategoricalColumn, joined_code: Any = None) -> Any:
    """``code * 4 + status`` of a categorical column (``joined_code``: the code column of a lookup join).

    The category lookup (``array_position``, the costly part) comes first in the CASE so Spark's
    subexpression elimination evaluates it once per row.
    """
    from pyspark.sql import functions as F

    typed = _typed(raw, column)
    unseen_value = _packed(column.other_code or 0, STATUS_OUT_OF_DOMAIN)
    null_value = _null_value(column, unseen_value)
    first = column.values[0]
    if joined_code is not None:
        found, code = joined_code.isNotNull(), joined_code
    elif _contiguous(column):
        # a contiguous integer range: arithmetic instead of a lookup
        found, code = (typed >= first) & (typed < first + len(column.values)), typed - first
    else:
        position = F.array_position(_value_array(column), typed)  # 1-based; 0 absent; null for null
        found, code = position > 0, position - 1
    if column.dtype in ("int", "long"):  # 9.5 or 1e30 is no integer category: the cast must be exact
        found = found & (typed.cast("double") == raw.try_cast("double"))
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


def numeric_value(raw: SparkColumn, column: NumericalColumn, source_type: str) -> Any:
    """The value of a numerical column as a double (dates and timestamps: seconds since the epoch)."""
    return (epoch_seconds(raw, source_type, column.dtype) if column.dtype in ("date", "timestamp")
            else raw.try_cast("double"))


def bin_index(x: SparkColumn, column: NumericalColumn) -> Any:
    """The bin of the double ``x`` (:func:`numeric_value`), clipped to the edge bins (null or NaN: the caller's)."""
    from pyspark.sql import functions as F

    edges = column.edge_array()
    bins = len(edges) - 1
    widths = np.diff(edges)
    if np.allclose(widths, widths[0], rtol=1e-12, atol=0):
        # clipped while still a double: +-inf and huge values never reach an integer cast
        position = F.least(F.greatest((x - F.lit(edges[0])) / F.lit(widths[0]), F.lit(0.0)), F.lit(bins - 1.0))
        index = F.floor(position).cast("int")
    else:
        index = sum((F.when(x >= F.lit(e), 1).otherwise(0) for e in edges[1:-1]), F.lit(0))
    return F.least(F.greatest(index, F.lit(0)), F.lit(bins - 1))


def _numerical(raw: SparkColumn, column: NumericalColumn, source_type: str) -> Any:
    """``code * 4 + status`` of a numerical column: the bin index, clipped to the edge bins."""
    from pyspark.sql import functions as F

    x = numeric_value(raw, column, source_type)
    edges = column.edge_array()
    clipped = bin_index(x, column) * (1 << STATUS_BITS)
    inside = (x >= F.lit(edges[0])) & (x <= F.lit(edges[-1]))  # false for NaN, null for null
    null_value = _null_value(column, _packed(0, STATUS_OUT_OF_DOMAIN))
    return (F.when(inside, clipped)
            .when(raw.isNull(), F.lit(null_value))
            .when(x.isNull() | F.isnan(x), F.lit(_packed(0, STATUS_NOT_A_NUMBER)))
            .otherwise(clipped + STATUS_OUT_OF_DOMAIN))


def encode(df: DataFrame, schema: Schema, keep: tuple[str, ...] = ()) -> EncodedTable:
    """Encode ``df`` against ``schema`` (lazy: nothing runs yet); the columns ``keep`` (the privacy id,
    for contribution bounding) are carried along as they are.

    Values that cannot be parsed as a categorical column's dtype are unseen categories, as are
    numbers too large for an integer category's type. In numerical columns, +-inf and huge values
    are clipped to the edge bins and counted as out of range; NaN and values that do not parse as a
    number cannot be clipped: they go to the first bin and are counted as what they are (status 3,
    ``not_a_number`` in the run report; an ``out_of_range: fail`` check counts them too).
    """
    from pyspark.sql import functions as F

    schema.check_table_columns(df.columns)
    types = dict(df.dtypes)
    columns = []
    for i, column in enumerate(schema.columns):
        raw = raw_value(schema, column)
        if isinstance(column, CategoricalColumn) and len(column.values) > LOOKUP_JOIN_ABOVE and not _contiguous(column):
            key, code = f"__privsyn_key{i}", f"__privsyn_code{i}"
            lookup = _lookup_table(df.sparkSession, column, key + "_value", code)
            df = df.withColumn(key, _typed(raw, column))
            df = df.join(F.broadcast(lookup), F.col(key) == F.col(key + "_value"), "left")
            value = _categorical(raw, column, F.col(code))
        elif isinstance(column, CategoricalColumn):
            value = _categorical(raw, column)
        else:
            assert isinstance(column, NumericalColumn)
            value = _numerical(raw, column, types[column.name])
        kind = "smallint" if (column.size << STATUS_BITS) < 2 ** 15 else "int"
        columns.append(value.cast(kind).alias(column.name))
    return EncodedTable(df.select(*columns, *[F.col(f"`{c}`") for c in keep]), schema, schema.domain())


def with_rule_codes(encoded: EncodedTable) -> EncodedTable:
    """``encoded`` plus a column per compound attribute of the schema's rules and per part of a timestamp
    declared with parts, over the synthesis domain (:mod:`privsyn_spark.schema.synthesis_view`): the form
    measurement counts. Unchanged without either."""
    from pyspark.sql import functions as F

    view = encoded.schema.view
    if not encoded.schema.rules and not view.parts:
        return encoded
    df = encoded.df
    for compound in view.compounds:
        cell = F.lit(0)
        for member, size in zip(compound.members, compound.member_sizes):
            cell = cell * F.lit(size) + F.shiftright(F.col(f"`{member}`"), STATUS_BITS)
        lut = F.split(F.lit(",".join(str(int(v)) for v in compound.lut)), ",").cast("array<int>")
        kind = "smallint" if (compound.size << STATUS_BITS) < 2 ** 15 else "int"
        df = df.withColumn(compound.name, F.element_at(lut, cell.cast("int") + 1).cast(kind))
    for part in view.parts:  # the inverse of TimestampColumn.recompose; the column's status stays on it
        source = encoded.schema.column(part.source)
        assert isinstance(source, TimestampColumn)
        code, hours = F.shiftright(F.col(f"`{part.source}`"), STATUS_BITS), source.hours
        value = (F.floor(code / hours) if part.part == "day"
                 else F.when(code >= source.base_size, hours).otherwise(code % hours))
        kind = "smallint" if (part.size << STATUS_BITS) < 2 ** 15 else "int"
        df = df.withColumn(part.name, (value * (1 << STATUS_BITS)).cast(kind))
    return EncodedTable(df, encoded.schema, view.domain(), (*view.compounds, *view.parts))
