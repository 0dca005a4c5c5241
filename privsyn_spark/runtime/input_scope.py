"""A run's input scope: ``--partition COL=VALUE`` (repeatable, ANDed) and ``--where SQL``.

A scheduled warehouse run measures one partition of a table (a day, a region), not the whole table.
:class:`Scope` filters the input lazily (Spark pushes an equality on a partition column of a Delta or
Parquet table down to the file listing, so only that partition's files are read: the plan's
``PartitionFilters``); an equality on a column that is not a partition column still filters, but
every file is scanned, and the run says so in a warning.

The scoped partition columns are constant within a run, so they are not synthesized attributes: a
schema that declares one is refused (:meth:`Scope.check_schema`); the synthetic rows carry the scoped
values as literals and are written with Delta ``replaceWhere`` for exactly that partition
(:mod:`privsyn_spark.write.delta_output`). ``--where`` only narrows the input (any Spark SQL
predicate, e.g. a date range); it does not scope the output.

A partition value is keyed by its typed value, not by its text: :meth:`Scope.canonical` has Spark cast
each value to its column's type once on the driver (a constant query: no data read) and renders it
back (``2024-1-15`` and `` 2024-01-15`` on a date column are ``2024-01-15``, ``05`` on an int column
is ``5``, ``yes`` on a boolean ``true``, a timestamp is written in UTC), so every spelling of one
partition selects its rows, charges its budget and names it in the provenance as one partition. A
text that does not cast, or whose rendering does not cast back to the same value, is refused.
:meth:`Scope.partition_files` lists the scoped partition's files (the file index: metadata, never a
row), so a run on a partition whose data has not landed is refused before anything is reserved, and
a run id is bound to the files it measured.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import BadInputData, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scope:
    """The partition values (column -> value, as given) and the extra SQL predicate of one run."""

    partition: tuple[tuple[str, str], ...] = ()
    where: str | None = None

    @classmethod
    def parse(cls, partitions: Iterable[str] = (), where: str | None = None) -> Scope:
        """A scope from ``COL=VALUE`` items (empty items are ignored: a templated caller's "none") and
        a ``--where`` predicate; one-line :class:`UsageError` for a malformed or repeated column."""
        pairs: dict[str, str] = {}
        for item in partitions:
            if not item.strip():
                continue
            column, sep, value = item.partition("=")
            column = column.strip()
            if not sep or not column or not value:
                raise UsageError(f"--partition {item!r}: expected COLUMN=VALUE")
            if column in pairs:
                raise UsageError(f"--partition {column}: given twice ({pairs[column]!r} and {value!r})")
            pairs[column] = value
        return cls(tuple(pairs.items()), (where or "").strip() or None)

    def __bool__(self) -> bool:
        return bool(self.partition or self.where)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.partition)

    def values(self) -> dict[str, str]:
        """The partition values as a dict (what the ledger and the provenance record)."""
        return dict(self.partition)

    def label(self) -> str:
        """``day=2024-01-01,region=EU`` (empty without partition values)."""
        return ",".join(f"{c}={v}" for c, v in self.partition)

    def describe(self, source: str) -> str:
        """``source`` with the scope, as a run id's fingerprint binds it (another scope: another run)."""
        if not self:
            return source
        parts = ([self.label()] if self.partition else []) + ([f"where {self.where}"] if self.where else [])
        return f"{source} [{'; '.join(parts)}]"

    def canonical(self, df: DataFrame) -> Scope:
        """This scope with each partition value rendered canonically for its column's type in ``df`` (the
        unscoped input; module docstring): Spark casts the texts in one constant query on the driver,
        reading no data. One-line :class:`UsageError` for a text that does not cast or round-trip."""
        from pyspark.sql.types import AtomicType, StringType

        types = {f.name: f.dataType for f in df.schema.fields}
        typed = [(i, c, v, types[c].simpleString()) for i, (c, v) in enumerate(self.partition)
                 if isinstance(types.get(c), AtomicType) and not isinstance(types[c], StringType)]
        if not typed:
            return self
        columns = []
        for i, _, value, sql_type in typed:
            cast = f"try_cast({sql_string(value)} AS {sql_type})"
            text = _rendered(cast, sql_type)
            columns += [f"{cast} IS NULL AS null{i}", f"{text} AS text{i}",
                        f"try_cast({text} AS {sql_type}) <=> {cast} AS same{i}"]
        row = df.sparkSession.sql("SELECT " + ", ".join(columns)).head()
        assert row is not None
        values = dict(self.partition)
        for i, column, value, sql_type in typed:
            if row[f"null{i}"]:
                raise UsageError(f"--partition {column}={value}: not a {sql_type} value (the input's column "
                                 f"{column!r} is {sql_type})")
            if not row[f"same{i}"]:
                raise UsageError(f"--partition {column}={value}: its {sql_type} value has no text that reads back "
                                 f"as the same value (it renders as {row[f'text{i}']!r}); give another spelling")
            values[column] = str(row[f"text{i}"])
        return Scope(tuple(values.items()), self.where)

    def partition_files(self, df: DataFrame) -> list[str] | None:
        """The data files of the scoped partition of ``df`` (the unscoped input; the scope's values on
        its partition columns only, ``--where`` ignored), as Spark's file index lists them for the scan:
        metadata, no row read. None when no scoped column is a partition column or the listing cannot
        be asked (Spark Connect, a source that is not a file table)."""
        from pyspark.sql import functions as F

        known = partition_columns(df)
        scoped = [(c, v) for c, v in self.partition if known and c in known]
        if not scoped:
            return None
        types = {f.name: f.dataType for f in df.schema.fields}
        for column, value in scoped:
            df = df.where(F.col(f"`{column}`") == F.lit(value).cast(types[column]))
        try:
            leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
            files: list[str] = []
            for i in range(leaves.size()):
                for folder in _items(leaves.apply(i).selectedPartitions().partitionDirectories()):
                    files += [str(f.getPath().toString()) for f in _items(folder.files())]
        except Exception as err:  # noqa: BLE001 - py4j: an internal API of this Spark version
            log.debug("partition files unknown (%s)", err)
            return None
        return sorted(files)

    def check_landed(self, df: DataFrame, source: str) -> list[str] | None:
        """:meth:`partition_files` of ``df`` (the input ``source``); :class:`BadInputData` (exit 4) when the
        scoped partition has no file yet: refused before anything is reserved (a listing is no release)."""
        files = self.partition_files(df)
        if files == []:
            raise BadInputData(f"--partition {self.label()}: the input {source} has no files in this partition "
                               f"(yet); nothing was charged: run it once the partition's data has landed")
        return files

    def check_schema(self, names: Iterable[str]) -> None:
        """Refuse a schema that declares a scoped partition column (it is constant within the run)."""
        declared = [c for c in self.columns if c in set(names)]
        if declared:
            raise UsageError(f"--partition {declared[0]}: the schema declares {declared[0]!r}, but a scoped "
                             f"partition column is constant within the run and written as the scoped value; "
                             f"remove it from the schema")

    def apply(self, df: DataFrame) -> DataFrame:
        """``df`` filtered to the scope (lazy; analysed now, so a bad column or predicate is a UsageError
        before anything is read or spent). Warns when a partition value is not on a partition column."""
        from pyspark.errors import AnalysisException, ParseException
        from pyspark.sql import functions as F

        if not self:
            return df
        types = {f.name: f.dataType for f in df.schema.fields}
        missing = [c for c in self.columns if c not in types]
        if missing:
            raise UsageError(f"--partition {missing[0]}: the input has no column {missing[0]!r}")
        for column, value in self.partition:
            df = df.where(F.col(f"`{column}`") == F.lit(value).cast(types[column]))
        if self.where:
            try:
                df = df.where(F.expr(self.where))
                df.schema  # noqa: B018 - analyses the predicate now (no job)
            except (AnalysisException, ParseException) as err:
                first = str(err).strip().splitlines()[0]
                raise UsageError(f"--where {self.where!r}: {first}") from None
        known = partition_columns(df)
        full = [c for c in self.columns if known is not None and c not in known]
        if full or known is None and self.partition:
            log.warning("--partition %s: %s, so the run scans every file of the input (a full scan); it still "
                        "reads only the matching rows", ",".join(full or self.columns),
                        "not a partition column of the input" if full else "the input's partition columns are unknown")
        return df

    def sql_predicate(self, types: Mapping[str, str]) -> str:
        """The scope's partition values as a Spark SQL predicate (Delta ``replaceWhere``); ``types``:
        each column's SQL type (``date``, ``int``, ``string``...)."""
        return " AND ".join(f"`{c.replace('`', '``')}` = CAST({sql_string(v)} AS {types.get(c, 'string')})"
                            for c, v in self.partition)


def _items(values: Any) -> list[Any]:
    """The elements of a py4j Java array or Scala sequence."""
    return list(values) if hasattr(values, "__iter__") else [values.apply(i) for i in range(values.size())]


def _rendered(cast: str, sql_type: str) -> str:
    """The SQL rendering of the typed value ``cast``: a timestamp in UTC (``Z``: the same text whatever the
    session's time zone), any other type as ``CAST(... AS STRING)``."""
    if sql_type == "timestamp":
        pattern = sql_string("yyyy-MM-dd HH:mm:ss.SSSSSS'Z'")
        return f"date_format(to_utc_timestamp({cast}, current_timezone()), {pattern})"
    return f"CAST({cast} AS STRING)"


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_columns(df: DataFrame) -> set[str] | None:
    """The partition columns of the file table(s) ``df`` reads (from its analysed plan's relations;
    None when they cannot be told: Spark Connect, or a source that is not a file table)."""
    jdf: Any = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        leaves = jdf.queryExecution().analyzed().collectLeaves()
        found: set[str] | None = None
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            relation = leaf.relation() if hasattr(leaf, "relation") else None
            if relation is None or not hasattr(relation, "partitionSchema"):
                continue
            found = (found or set()) | set(relation.partitionSchema().fieldNames())
        return found
    except Exception as err:  # noqa: BLE001 - py4j: an internal API of this Spark version
        log.debug("partition columns unknown (%s)", err)
        return None
