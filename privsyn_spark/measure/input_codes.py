"""The run's input, read once: encoded, bit-packed and written once to a Parquet scratch table.

The source table is scanned by exactly one Spark job per run: the one writing the packed code
words (:class:`~privsyn_spark.measure.packing.PackedCodes`, a few bigint columns) to
``<scratch_dir>``. Every later pass -- both marginal-engine passes and the evaluation's real side --
reads those words back, never the source, and never re-parses or re-encodes it. A CSV source is
read with all-string columns (no type-inference pass; encoding parses each declared column against
its declared type).

Why a Parquet scratch and not ``persist()``: cached blocks live on executors, so a lost executor
makes Spark recompute them from the source (a second, partial read) and memory pressure evicts them;
files on the run's storage survive executor loss and hold only the packed words (a few bytes a
row, compressed), which every pass reads without parsing or encoding anything. The scratch holds codes of private
rows: it is deleted when the run's steps are done (``close``, also on error); a run killed before
that leaves it under the run folder, and the next run with that id overwrites it.

With a person as the privacy unit (the schema's ``privacy_unit``), the rows are bounded to K per id
(:mod:`~privsyn_spark.measure.bounding`) in the same job, on the packed words (:func:`bounded_codes`):
the scratch holds only bounded rows, so every count and the evaluation's real side see the bounded
table, and the id columns never reach the scratch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure.bounding import Bounded, bound_contributions, check_id_columns
from privsyn_spark.measure.encode import EncodedTable, encode, with_rule_codes
from privsyn_spark.measure.packing import PackedCodes, pack_codes
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.scratch import delete
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class InputCodes:
    """Lazily read, encode and persist the input once; hand out the persisted packed codes.

    Use as a context manager (or call ``close``): the scratch table is deleted on exit. ``source`` is
    a table location (read with ``fmt``) or a Spark DataFrame of the raw table (the API's ``fit``).
    ``scope`` (:class:`~privsyn_spark.runtime.input_scope.Scope`) filters it to the run's partition;
    a scoped source is analysed here, so a bad column or predicate stops the run before anything is spent,
    its partition values are made canonical (:meth:`~privsyn_spark.runtime.input_scope.Scope.canonical`:
    ``scope`` is then that) and a partition with no files yet is refused; ``files``: the scoped partition's
    data files (None when unscoped or unknown), what the run id's fingerprint binds.
    """

    def __init__(self, spark: SparkSession, source: Any, fmt: str | None, schema: Schema, scratch_dir: str,
                 scope: Scope | None = None) -> None:
        self.spark, self.source, self.fmt, self.schema = spark, source, fmt, schema
        self.scope = scope or Scope()
        self.scratch_dir = str(scratch_dir)
        self.name: str | None = None  # a DataFrame source's label (e.g. the two locations it joins), if any
        self._packed: PackedCodes | None = None
        self._raw: DataFrame | None = None
        self._bounded: Bounded | None = None
        self.files: list[str] | None = None
        if self.scope:
            self.scope.check_schema(schema.names)
            self.raw()

    @property
    def label(self) -> str | None:
        """The source location with its scope (what a run id's fingerprint binds); for a DataFrame its
        ``name``, else None."""
        return self.scope.describe(self.source) if isinstance(self.source, str) else self.name

    def raw(self) -> DataFrame:
        """The (scoped) raw table as a lazy DataFrame (nothing is read but its columns)."""
        if self._raw is None:
            raw = (self.source if not isinstance(self.source, str)
                   else read_table(self.spark, self.source, self.fmt, infer_types=False))
            if self.scope.partition:
                self.scope = self.scope.canonical(raw)
                self.files = self.scope.check_landed(raw, self.source if isinstance(self.source, str) else "DataFrame")
            self._raw = self.scope.apply(raw)
        return self._raw

    def check_columns(self) -> None:
        """``UsageError`` if the schema's privacy id columns are missing from the source, ``BadInputData`` if a
        declared column holds nested values (its type: no data read)."""
        self.schema.check_table_types(self.raw().dtypes)
        if not self.schema.privacy_unit.is_row:
            check_id_columns(self.schema.privacy_unit, list(self.raw().columns), self.schema.names)

    def rows(self) -> DataFrame:
        """The (scoped) source bounded to K rows per id (the source itself for a row unit), for the
        evaluation's value metrics: a bounding of its own, distributed like the one the counts were made on."""
        unit = self.schema.privacy_unit
        return self.raw() if unit.is_row else bound_contributions(self.raw(), unit).df

    def bounding(self) -> dict | None:
        """What bounding the rows per id did (exact, NOT private: the operator report), once written."""
        return None if self._bounded is None else self._bounded.stats()

    def packed(self) -> PackedCodes:
        """The packed codes read from the scratch table (written on the first call: the one scan of the source)."""
        if self._packed is None:
            self.check_columns()
            packed, self._bounded = bounded_codes(self.raw(), self.schema)
            packed.df.write.mode("overwrite").parquet(self.scratch_dir)
            self._packed = packed.with_df(self.spark.read.parquet(self.scratch_dir))
            log.info("input encoded once into the scratch table %s (%d bigint words a row)",
                     self.scratch_dir, packed.words)
        return self._packed

    def encoded(self) -> EncodedTable:
        """The schema's encoded columns (``code * 4 + status``), unpacked from the scratch table."""
        return self.packed().unpacked()

    def close(self) -> None:
        """Delete the scratch table (nothing happens if it was never written)."""
        if self._packed is not None:
            delete(self.spark, self.scratch_dir)
            self._packed = None
        self._raw = None

    def __enter__(self) -> InputCodes:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def bounded_codes(raw: Any, schema: Schema, seed: int | None = None) -> tuple[PackedCodes, Bounded]:
    """The packed codes of ``raw`` bounded to the schema's K rows per id (lazy): encoded and packed on
    the map side with the id carried along, so the one shuffle of bounding moves only the id and a
    few bigint words a row; the id is dropped right after. ``seed``: tests only."""
    unit = schema.privacy_unit
    encoded = with_rule_codes(encode(raw, schema, unit.id_columns))  # + the rules' compounds
    packed = pack_codes(encoded, unit.id_columns)
    bounded = bound_contributions(packed.df, unit, seed)
    return (packed if unit.is_row else packed.with_df(bounded.df.drop(*unit.id_columns))), bounded


