"""Decoding synthetic codes back to the original schema (vectorised numpy, per Arrow batch).

1. Merged rare values are expanded: a record in a merged cell gets one of the original codes of
   that cell, drawn with the noisy 1-way marginal on the original domain (negatives as zero);
   absent values (``estimate.zeroed_values.absent_values``: a null or ``other`` code below the
   rare-value threshold) get no weight, so they never appear.
2. Codes become values: categories with their declared type; a spike bin its one value exactly;
   other numerical bins a value drawn uniformly inside the bin (whole numbers for
   int/long/date/timestamp, bounds respected);
   the null code becomes null; the ``other`` code becomes ``"__other__"`` in string columns and
   null elsewhere.
All of it is post-processing of the measurements artifact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from privsyn_spark.measure.encode import spark_type
from privsyn_spark.randomness import Stage, uniforms_at
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.schema.columns import CategoricalColumn, NumericalColumn, integer_bin_bounds
from privsyn_spark.schema.rules import bin_value_bounds
from privsyn_spark.schema.schema import Schema
from privsyn_spark.schema.synthesis_view import CompoundColumn
from privsyn_spark.schema.time_parts import TimestampColumn
from privsyn_spark.synthesize.sharded.spark_driver import CodeBatches

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

OTHER_LABEL = "__other__"
_ARROW = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "double": pa.float64(),
          "float": pa.float32(), "boolean": pa.bool_(), "date": pa.date32(),
          "timestamp": pa.timestamp("us", tz="UTC")}


def output_ddl(schema: Schema) -> str:
    """Spark DDL of the synthetic table: the schema's kept columns, in order, with their types."""
    return ", ".join(f"`{c.name}` {spark_type(c.dtype)}" for c in schema.columns)


class RowUniforms:
    """The decoding draws of consecutive rows ``start ..`` of one shard: uniforms per (column, use),
    a function of (seed, shard, row position) only (:func:`privsyn_spark.randomness.uniforms_at`)."""

    def __init__(self, seed: int, shard: int, start: int, rows: int) -> None:
        self.seed, self.shard, self.start, self.rows = seed, shard, start, rows

    def __call__(self, column: int, use: int) -> np.ndarray:
        return uniforms_at(self.seed, Stage.DECODE, self.shard, 2 * column + use, self.start, self.rows)


_EXPAND, _VALUE = 0, 1  # the two uses of a column's draws


class Decoder:
    """Turns (n, d) merged-domain code arrays into typed Arrow batches of the original schema.

    The code columns are the synthesis domain's (:attr:`Schema.view`): with declared rules, a
    compound attribute decodes to its members' codes and a derived column is generated from its
    source (:mod:`privsyn_spark.schema.synthesis_view`); for an inequality ``low <= high``, a pair
    whose values drawn inside their bins break it is drawn again jointly inside the same bins
    (:func:`_keep_inequality`), so every row keeps every rule.
    """

    def __init__(self, schema: Schema, value_maps: Mapping[str, np.ndarray],
                 one_way_original: Mapping[str, np.ndarray], absent: Mapping[str, np.ndarray] | None = None):
        self.schema = schema
        absent = absent or {}
        self._expand = {c.name: _expansion(np.asarray(value_maps[c.name]), np.asarray(one_way_original[c.name]),
                                           absent.get(c.name))
                        for c in schema.view.columns if c.name in value_maps}

    def original_codes(self, merged: np.ndarray, attr: str, u: np.ndarray | None) -> np.ndarray:
        """Expand merged codes of ``attr`` to original codes (identity where nothing was merged);
        ``u``: one uniform per record (None when no group of ``attr`` has several members); only records
        in groups of several members are searched."""
        if attr not in self._expand:
            return merged
        members, keys, starts, merged_group = self._expand[attr]
        out = members[starts[merged]]  # a group of one member (most of them) decodes to that member
        drawn = merged_group[merged]
        if drawn.any():
            # keys = group + cumulative share within the group, increasing over the concatenated groups,
            # so one searchsorted picks a member of each record's own group with the right probability
            if u is None:
                raise ValueError(f"original_codes: {attr!r} has groups of several members but no uniforms were given")
            m = merged[drawn]
            position = np.searchsorted(keys, m + u[drawn], side="right")
            out[drawn] = members[np.clip(position, starts[m], starts[m + 1] - 1)]
        return out

    def column_codes(self, merged_codes: np.ndarray, uniforms: RowUniforms) -> dict[str, np.ndarray]:
        """Original codes of every kept column of the schema (compounds split, timestamps' parts recomposed,
        derived columns generated)."""
        codes: dict[str, np.ndarray] = {}
        for j, column in enumerate(self.schema.view.columns):
            c = np.asarray(merged_codes[:, j], dtype=np.int64)
            if column.name in self._expand:
                merges = self._expand[column.name][3].any()  # else the column's draws are not needed
                c = self.original_codes(c, column.name, uniforms(j, _EXPAND) if merges else None)
            if isinstance(column, CompoundColumn):
                codes.update(zip(column.members, column.cells[c].T))
            else:
                codes[column.name] = c
        for source in dict.fromkeys(p.source for p in self.schema.view.parts):
            column = self.schema.column(source)
            assert isinstance(column, TimestampColumn)
            day, hour = (codes.pop(p.name) for p in self.schema.view.parts if p.source == source)
            codes[source] = column.recompose(day, hour)
        for d in self.schema.view.derivations:  # sources first
            codes[d.column] = d.codes[codes[d.source]]
        return codes

    def decode(self, merged_codes: np.ndarray, uniforms: RowUniforms) -> pa.RecordBatch:
        """Decode one batch of records (rows: records, columns: the synthesis domain's attributes)."""
        view = self.schema.view
        codes = self.column_codes(merged_codes, uniforms)
        derived = {d.column: d for d in view.derivations}
        drawn = {}
        for j, column in enumerate(self.schema.columns):
            if isinstance(column, NumericalColumn) and column.name not in derived:
                drawn[column.name] = _numerical_draw(column, codes[column.name], uniforms(j, _VALUE))
        for k, names in enumerate(view.inequalities):
            extra = len(self.schema.columns) + 2 * k  # draws of their own: the streams after the columns'
            low, high = (self.schema.column(c) for c in names)
            assert isinstance(low, NumericalColumn) and isinstance(high, NumericalColumn)
            _keep_inequality(low, high, codes, drawn, uniforms(extra, _VALUE), uniforms(extra + 1, _VALUE))
        arrays = []
        for column in self.schema.columns:
            if column.name in derived:
                d = derived[column.name]
                arrays.append(pa.array(list(d.values), type=_ARROW[column.dtype]).take(pa.array(codes[d.source])))
            elif isinstance(column, CategoricalColumn):
                arrays.append(_categorical_values(column, codes[column.name]))
            else:
                assert isinstance(column, NumericalColumn)
                arrays.append(_numerical_array(column, *drawn[column.name]))
        return pa.RecordBatch.from_arrays(arrays, names=list(self.schema.names))


def _expansion(value_map: np.ndarray, weights: np.ndarray, absent: np.ndarray | None = None) -> Any:
    """Original codes sorted by merged code, their search keys (group + cumulative share), group starts,
    and which merged codes are groups of several members.

    Absent codes get no weight; a group whose other noisy counts are all <= 0 is uniform over its
    present members (over all of them if none is present: such a group is never generated).
    """
    order = np.argsort(value_map, kind="stable")
    groups = value_map[order]
    starts = np.searchsorted(groups, np.arange(int(value_map.max()) + 2))
    present = np.ones(len(order), dtype=bool) if absent is None else ~np.asarray(absent, dtype=bool)[order]
    w = np.where(present, np.clip(weights[order].astype(np.float64), 0, None), 0.0)
    totals = np.add.reduceat(w, starts[:-1]) if len(w) else w
    alive = np.add.reduceat(present.astype(np.float64), starts[:-1]) if len(w) else w
    w = np.where(totals[groups] > 0, w, np.where(alive[groups] > 0, present, 1.0).astype(np.float64))
    totals = np.add.reduceat(w, starts[:-1])
    cumulative = np.cumsum(w) - np.repeat(np.cumsum(totals) - totals, np.diff(starts))
    return order.astype(np.int64), groups + cumulative / totals[groups], starts, np.diff(starts) > 1


def _categorical_values(column: CategoricalColumn, codes: np.ndarray) -> pa.Array:
    labels = list(column.values) + [None] * (column.size - len(column.values))
    if column.other_code is not None and column.dtype == "string":
        labels[column.other_code] = OTHER_LABEL
    table = pa.array(labels, type=_ARROW[column.dtype])
    return table.take(pa.array(codes))


def _numerical_draw(column: NumericalColumn, codes: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, null)``: a value per record drawn uniformly inside its bin (a spike bin: its value)."""
    edges = column.edge_array()
    bins = len(edges) - 1
    null = codes >= bins
    b = np.where(null, 0, codes)
    if column.integer:
        lo, hi = integer_bin_bounds(edges)
        values = lo[b] + np.floor(u * (hi[b] - lo[b] + 1)).astype(np.int64)
        values = np.minimum(values, hi[b])
    else:
        values = edges[b] + u * (edges[b + 1] - edges[b])
        values = np.minimum(values, edges[-1])
        for code, value in column.spike_codes().items():  # a spike bin is its one value
            values[b == code] = value
    return values, null


def _uniform_between(a: np.ndarray, b: np.ndarray, u: np.ndarray, integer: bool) -> np.ndarray:
    if integer:
        return np.minimum(a + np.floor(u * (b - a + 1)), b)
    return np.minimum(a + u * (b - a), b)


def _keep_inequality(low: NumericalColumn, high: NumericalColumn, codes: Mapping[str, np.ndarray],
                     drawn: dict[str, tuple[np.ndarray, np.ndarray]], u_high: np.ndarray, u_low: np.ndarray) -> None:
    """Rule ``low <= high``, in place: records whose independent in-bin draws break it get the pair drawn
    again inside the same two bins, ``high`` uniform on ``[max(low_min, high_min), high_max]`` then ``low``
    uniform on ``[low_min, min(low_max, high)]``. The bin pair allows such values: pairs that cannot hold
    them are not in the synthesis domain (:meth:`privsyn_spark.schema.rules.Rule.allowed`). Nulls keep
    every rule."""
    (vl, nl), (vh, nh) = drawn[low.name], drawn[high.name]
    broken = np.flatnonzero(~nl & ~nh & (vl > vh))
    if not broken.size:
        return

    lo_l, hi_l = (x[codes[low.name][broken]] for x in bin_value_bounds(low))
    lo_h, hi_h = (x[codes[high.name][broken]] for x in bin_value_bounds(high))
    new_high = _uniform_between(np.maximum(lo_h, lo_l), hi_h, u_high[broken], high.integer)
    new_low = _uniform_between(lo_l, np.minimum(hi_l, new_high), u_low[broken], low.integer)
    vh[broken] = new_high.astype(vh.dtype)
    vl[broken] = new_low.astype(vl.dtype)


def _numerical_array(column: NumericalColumn, values: np.ndarray, null: np.ndarray) -> pa.Array:
    mask = null if null.any() else None
    if column.dtype == "date":
        return pa.array((values // 86400).astype(np.int32), type=pa.date32(), mask=mask)
    if column.dtype == "timestamp":
        return pa.array(values.astype(np.int64) * 1_000_000, type=_ARROW["timestamp"], mask=mask)
    dtype = {"int": np.int32, "long": np.int64, "double": np.float64, "float": np.float32}[column.dtype]
    return pa.array(values.astype(dtype), type=_ARROW[column.dtype], mask=mask)


def decode_dataframe(codes: DataFrame | CodeBatches, schema: Schema, value_maps: Mapping[str, np.ndarray],
                     one_way_original: Mapping[str, np.ndarray], seed: int,
                     absent: Mapping[str, np.ndarray] | None = None) -> Any:
    """Decode merged codes (one int column per attribute) on the executors: a Spark DataFrame, or the
    synthesizers' :class:`CodeBatches`, made and decoded in the same Python pass.

    Partition ``i`` of the codes must hold synthesis shard ``i`` in a fixed order (what both
    synthesizers produce: one partition per shard); a record's draws are a function of (seed, its
    shard, its position in the shard) only (:mod:`privsyn_spark.randomness`), so the table does not
    depend on the session's Arrow batch size or parallelism. ``absent``: per column, original
    codes never to decode to (see the module docstring).
    """
    decoder = Decoder(schema, value_maps, one_way_original, absent)
    names = list(schema.view.names)  # the synthesis domain's attributes (the schema's columns without rules)

    if isinstance(codes, CodeBatches):
        source, produce = codes.source, codes.produce
    else:
        source, produce = codes.select(*[f"`{n}`" for n in names]), None

    def decode_batches(batches: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None  # inside a Spark task
        shard, start = context.partitionId(), 0
        for batch in batches if produce is None else produce(batches):
            if batch.num_rows == 0:
                continue
            codes = np.column_stack([batch.column(name).to_numpy(zero_copy_only=False) for name in names])
            yield decoder.decode(codes, RowUniforms(seed, shard, start, batch.num_rows))
            start += batch.num_rows

    out = source.mapInArrow(decode_batches, output_ddl(schema))
    strings = [c.name for c in schema.columns if c.dtype == "string"]
    return backend_of(out.sparkSession).plain_strings(out, strings)
