"""Encoding on the executors: each row becomes integer codes, with Spark expressions only.

Codes of all columns, plus a 2-bit status per column (0 in domain, 1 outside the declared domain,
2 a null where nulls fail), are bit-packed into a few int64 columns in Spark SQL, so the hand-off
to Python (the marginal engine) moves 8 bytes per ~60 bits of codes instead of a column per code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn
from privsyn_spark.schema.schema import Schema

STATUS_OK, STATUS_OUT_OF_DOMAIN, STATUS_NULL = 0, 1, 2
STATUS_BITS = 2
WORD_BITS = 63  # keep the sign bit clear


@dataclass(frozen=True)
class Field:
    """Where one packed value lives: word index, bit offset and width."""

    name: str
    word: int
    offset: int
    bits: int

    def extract(self, words: list[np.ndarray]) -> np.ndarray:
        """Unpack this field from the word arrays of one Arrow batch (numpy, vectorised)."""
        if self.bits == 0:
            return np.zeros(len(words[0]) if words else 0, dtype=np.int64)
        return (words[self.word] >> self.offset) & ((1 << self.bits) - 1)


@dataclass(frozen=True)
class EncodedTable:
    """A DataFrame of packed code words, the domain, and where each code and status lives."""

    df: object  # pyspark.sql.DataFrame with int64 columns w0..w{k-1}
    schema: Schema
    domain: Domain
    codes: dict[str, Field]
    status: dict[str, Field]

    @property
    def word_columns(self) -> list[str]:
        return [f"w{i}" for i in range(_word_count(list(self.codes.values()) + list(self.status.values())))]


def _word_count(fields: list[Field]) -> int:
    return 1 + max((f.word for f in fields), default=0)


def _bits(size: int) -> int:
    return int(size - 1).bit_length()


def _layout(schema: Schema) -> tuple[dict[str, Field], dict[str, Field]]:
    """First-fit packing of every code and status field into 63-bit words."""
    widths = [(("code", c.name), _bits(c.size)) for c in schema.columns]
    widths += [(("status", c.name), STATUS_BITS) for c in schema.columns]
    used: list[int] = []
    placed: dict[tuple[str, str], Field] = {}
    for key, bits in widths:
        word = next((i for i, u in enumerate(used) if u + bits <= WORD_BITS), None)
        if word is None:
            used.append(0)
            word = len(used) - 1
        placed[key] = Field(key[1], word, used[word], bits)
        used[word] += bits
    codes = {name: placed[("code", name)] for name in schema.names}
    status = {name: placed[("status", name)] for name in schema.names}
    return codes, status


def _spark_type(dtype: str) -> str:
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
    """(code, status) expressions for a categorical column."""
    from pyspark.sql import functions as F

    typed = raw.try_cast(_spark_type(column.dtype)) if column.dtype != "string" else F.trim(raw.cast("string"))
    values = F.array(*[F.lit(v).cast(_spark_type(column.dtype)) for v in column.values])
    position = F.array_position(values, typed)  # 1-based; 0 when absent
    unseen_code = column.other_code if column.other_code is not None else 0
    null_code = column.null_code if column.null_code is not None else 0
    code = (F.when(raw.isNull(), F.lit(null_code))
            .when(typed.isNull() | (position == 0), F.lit(unseen_code))
            .otherwise(position - 1))
    status = (F.when(raw.isNull(), F.lit(STATUS_NULL if column.nulls == "fail" else STATUS_OK))
              .when(typed.isNull() | (position == 0), F.lit(STATUS_OUT_OF_DOMAIN))
              .otherwise(F.lit(STATUS_OK)))
    return code, status


def _as_number(raw, column: NumericalColumn):
    """Numbers as doubles; dates and timestamps as seconds since the epoch (UTC)."""
    from pyspark.sql import functions as F

    if column.dtype in ("date", "timestamp"):
        return F.unix_timestamp(raw.try_cast("timestamp")).cast("double")
    return raw.try_cast("double")


def _numerical(raw, column: NumericalColumn):
    """(code, status) expressions for a numerical column: bin index, clipped to the edge bins."""
    from pyspark.sql import functions as F

    x = _as_number(raw, column)
    edges = column.edge_array()
    bins = len(edges) - 1
    widths = np.diff(edges)
    if np.allclose(widths, widths[0], rtol=1e-12, atol=0):
        index = F.floor((x - F.lit(edges[0])) / F.lit(widths[0]))
    else:
        index = sum((F.when(x >= F.lit(e), 1).otherwise(0) for e in edges[1:-1]), F.lit(0))
    clipped = F.least(F.greatest(index.cast("int"), F.lit(0)), F.lit(bins - 1))
    outside = (x < F.lit(edges[0])) | (x > F.lit(edges[-1])) | F.isnan(x)
    null_code = column.null_code if column.null_code is not None else 0
    code = (F.when(raw.isNull(), F.lit(null_code)).when(x.isNull() | F.isnan(x), F.lit(0)).otherwise(clipped))
    status = (F.when(raw.isNull(), F.lit(STATUS_NULL if column.nulls == "fail" else STATUS_OK))
              .when(x.isNull() | outside, F.lit(STATUS_OUT_OF_DOMAIN))
              .otherwise(F.lit(STATUS_OK)))
    return code, status


def encode(df, schema: Schema) -> EncodedTable:
    """Encode ``df`` against ``schema`` into packed code words (lazy: nothing runs yet).

    Values that cannot be parsed as the declared type count as outside the domain, like
    unseen categories and out-of-range numbers. Unparseable numbers and NaN go to the first bin
    (they cannot be clipped) and are counted as out of range.
    """
    from pyspark.sql import functions as F

    schema.check_table_columns(df.columns)
    codes, status = _layout(schema)
    terms: dict[int, list] = {}
    for column in schema.columns:
        raw = _raw(schema, column)
        code, state = (_categorical(raw, column) if isinstance(column, CategoricalColumn)
                       else _numerical(raw, column))
        for field, expr in ((codes[column.name], code), (status[column.name], state)):
            if field.bits:
                terms.setdefault(field.word, []).append(F.shiftleft(expr.cast("long"), field.offset))
    words = []
    for i in range(_word_count(list(codes.values()) + list(status.values()))):
        parts = terms.get(i, [F.lit(0).cast("long")])
        word = parts[0]
        for part in parts[1:]:
            word = word.bitwiseOR(part)
        words.append(word.alias(f"w{i}"))
    return EncodedTable(df.select(*words), schema, schema.domain(), codes, status)
