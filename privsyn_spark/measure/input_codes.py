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
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure.encode import EncodedTable, encode
from privsyn_spark.measure.packing import PackedCodes, pack_codes
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class InputCodes:
    """Lazily read, encode and persist the input once; hand out the persisted packed codes.

    Use as a context manager (or call ``close``): the scratch table is deleted on exit. ``source`` is
    a table location (read with ``fmt``) or a Spark DataFrame of the raw table (the API's ``fit``).
    """

    def __init__(self, spark: SparkSession, source: Any, fmt: str | None, schema: Schema, scratch_dir: str) -> None:
        self.spark, self.source, self.fmt, self.schema = spark, source, fmt, schema
        self.scratch_dir = str(scratch_dir)
        self._packed: PackedCodes | None = None

    def packed(self) -> PackedCodes:
        """The packed codes read from the scratch table (written on the first call: the one scan of the source)."""
        if self._packed is None:
            from privsyn_spark.runtime.input_table import read_table

            raw = (self.source if not isinstance(self.source, str)
                   else read_table(self.spark, self.source, self.fmt, infer_types=False))
            packed = pack_codes(encode(raw, self.schema))
            packed.df.write.mode("overwrite").parquet(self.scratch_dir)
            self._packed = packed.with_df(self.spark.read.parquet(self.scratch_dir))
            log.info("input encoded once into the scratch table %s (%d bigint words a row)",
                     self.scratch_dir, packed.words)
        return self._packed

    def encoded(self) -> EncodedTable:
        """The encoded columns (``code * 4 + status``), unpacked from the scratch table."""
        return self.packed().unpacked()

    def close(self) -> None:
        """Delete the scratch table (nothing happens if it was never written)."""
        if self._packed is not None:
            _delete(self.spark, self.scratch_dir)
            self._packed = None

    def __enter__(self) -> InputCodes:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _delete(spark: SparkSession, path: str) -> None:
    """Remove a folder on any file system Spark's Hadoop configuration reaches (a local path too)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: only local scratch folders can be removed from here
        shutil.rmtree(Path(path.removeprefix("file://")), ignore_errors=True)
        return
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(hadoop_path, True)
