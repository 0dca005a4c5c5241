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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import UsageError

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

    def to_json(self) -> str | None:
        """The partition values as the ledger's JSON column (None when unscoped)."""
        return json.dumps(self.values(), sort_keys=True) if self.partition else None


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
