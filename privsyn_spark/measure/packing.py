"""Bit-packing of the encoded columns and the counter layout both counting backends follow.

The encoded columns (``code * 4 + status`` each) are packed in Spark SQL into as few bigint
columns ("words") as fit, first fit at 63 bits each: fewer, wider columns are cheaper to move
than one narrow column per attribute. :class:`CounterLayout` says where every attribute sits in the
words, how its code is recoded, and where every computed table (a :class:`CountLayout`), the row count
and the out-of-domain / null-failure tallies live in the flat count array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.measure.count_layout import CountLayout
from privsyn_spark.measure.encode import STATUS_BITS, TALLIED_STATUSES, EncodedTable
from privsyn_spark.schema.columns import Column
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class CounterLayout:
    """What a counting pass follows (the JVM decodes it as ``MarginalCounter.Layout``): where codes sit in
    the packed words, how they are recoded, and the :class:`CountLayout` of the flat count array."""

    fields: dict[str, tuple[int, int, int]]
    """Per encoded column: (word, bit offset, width); the status is the low ``STATUS_BITS`` bits."""
    words: int
    counts: CountLayout
    """The computed tables (canonical order, over the recoded domain) in the flat count array."""
    luts: dict[str, np.ndarray]
    """Per attribute used by a table: old code -> new code (identity when not recoded)."""

    # cached: the counters index them per table (thousands of tables in a 1+2-way pass)
    @cached_property
    def tables(self) -> list[tuple[str, ...]]:
        return list(self.counts.keys)

    @cached_property
    def shapes(self) -> list[tuple[int, ...]]:
        return [self.counts.domain.shape(k) for k in self.counts.keys]

    @cached_property
    def offsets(self) -> np.ndarray:
        """Start of each table in the flat array; ``offsets[-1]`` is the total number of cells."""
        return np.asarray([self.counts.offsets[k] for k in self.counts.keys] + [self.counts.size], dtype=np.int64)

    @property
    def needed(self) -> list[str]:
        """Attributes some table uses, in encoded-column order."""
        return [name for name in self.fields if name in self.luts]

    @property
    def cells(self) -> int:
        return self.counts.size

    @property
    def length(self) -> int:
        """Cells, then the row count, then per encoded column a tally of each of :data:`TALLIED_STATUSES`
        (out of domain, null failure, not a number)."""
        return self.cells + 1 + len(TALLIED_STATUSES) * len(self.fields)

    def status_masks(self) -> list[int]:
        """Per word, the bits holding some column's status."""
        masks = [0] * self.words
        for word, offset, _ in self.fields.values():
            masks[word] |= ((1 << STATUS_BITS) - 1) << offset
        return masks

    def split(self, total: np.ndarray) -> tuple[dict[tuple[str, ...], np.ndarray], int, list[dict[str, int]]]:
        """The flat array as (tables, rows, per status of :data:`TALLIED_STATUSES` its tally per column)."""
        tables = self.counts.unpack(total[:self.cells])
        tail, k = self.cells, len(TALLIED_STATUSES)
        names = list(self.fields)
        return (tables, int(total[tail]),
                [{a: int(total[tail + 1 + k * j + s]) for j, a in enumerate(names)} for s in range(k)])


@dataclass(frozen=True)
class PackedCodes:
    """The encoded columns bit-packed into bigint words ``w0, w1, ...``: what a counting pass reads.

    The word layout depends only on the schema, so one packed table serves every request; it can be
    persisted (:mod:`~privsyn_spark.measure.input_codes`) and read back as it is.
    """

    df: DataFrame  # columns w0, w1, ...
    schema: Schema
    domain: Domain
    fields: dict[str, tuple[int, int, int]]
    """Per encoded column: (word, bit offset, width); the status is the low ``STATUS_BITS`` bits."""
    extra: tuple[Column, ...] = ()
    """Packed columns beyond the schema's (:attr:`EncodedTable.extra`); ``domain`` is then the synthesis domain."""

    @property
    def words(self) -> int:
        return 1 + max((word for word, _, _ in self.fields.values()), default=-1)

    def with_df(self, df: DataFrame) -> PackedCodes:
        """The same layout over another DataFrame holding the same words (e.g. read back from storage)."""
        return replace(self, df=df)

    def counter_layout(self, domain: Domain, tables: Sequence[tuple[str, ...]],
                       recode: Mapping[str, np.ndarray]) -> CounterLayout:
        """How to count the ``tables`` (over the recoded ``domain``; ``recode`` maps old codes to new)."""
        needed = {a for m in tables for a in m}
        luts = {a: np.asarray(recode[a], dtype=np.int64) if a in recode else np.arange(self.domain[a])
                for a in self.fields if a in needed}
        return CounterLayout(fields=self.fields, words=self.words, counts=CountLayout(domain, tables), luts=luts)

    def unpacked(self) -> EncodedTable:
        """The ``code * 4 + status`` columns again (named as the attributes), as Spark expressions."""
        from pyspark.sql import functions as F

        columns = [F.shiftright(F.col(f"w{word}"), offset).bitwiseAND((1 << bits) - 1).cast(
                   "smallint" if bits < 16 else "int").alias(name)
                   for name, (word, offset, bits) in self.fields.items() if name in self.schema.names]
        domain = self.schema.domain() if self.schema.rules or self.extra else self.domain  # the schema's columns only
        return EncodedTable(self.df.select(*columns), self.schema, domain)


def pack_codes(encoded: EncodedTable, keep: tuple[str, ...] = ()) -> PackedCodes:
    """Pack ``encoded`` first fit into 63-bit words (lazily, in Spark SQL); ``keep``: columns carried along."""
    from pyspark.sql import functions as F

    used: list[int] = []
    fields: dict[str, tuple[int, int, int]] = {}
    for column in (*encoded.schema.columns, *encoded.extra):
        bits = int((column.size << STATUS_BITS) - 1).bit_length()
        word = next((i for i, u in enumerate(used) if u + bits <= 63), None)
        if word is None:
            used.append(0)
            word = len(used) - 1
        fields[column.name] = (word, used[word], bits)
        used[word] += bits
    words: list[Any] = [None] * len(used)
    for name, (word, offset, _) in fields.items():
        term = F.shiftleft(F.col(f"`{name}`").cast("long"), offset)
        words[word] = term if words[word] is None else words[word].bitwiseOR(term)
    packed = encoded.df.select(*[w.alias(f"w{i}") for i, w in enumerate(words)], *[F.col(f"`{c}`") for c in keep])
    return PackedCodes(packed, encoded.schema, encoded.domain, fields, encoded.extra)
