"""The schema document: its format, and its validation into the parts of a
:class:`~privsyn_spark.schema.schema.Schema` (columns, dropped names, null tokens).

A YAML or JSON document::

    null_tokens: ["?"]            # strings read as null in every column (optional)
    max_column_codes: 5000        # refuse columns with more codes than this (optional)
    columns:
      - {name: age, type: numerical, dtype: int, min: 17, max: 90, bins: 16}
      - {name: income, type: numerical, dtype: double, edges: [0, 1000, 10000, 1e6]}
      - {name: workclass, type: categorical, values: [Private, State-gov], unseen: other}
      - {name: visit, type: timestamp, start: "2024-01-01", end: "2024-03-31", parts: [day, hour]}
      - {name: person_id, type: drop}

Per column: ``nulls`` is ``value`` (own code, default), ``fail`` or ``none`` (declared non-null: no
null code, a null is out of domain); numerical ``spikes`` lists values that get a bin of their own;
categorical ``unseen`` is ``other`` (default) or ``fail``; numerical ``out_of_range`` is ``clip`` (default) or ``fail``.
An optional top-level ``rules`` list declares rules every synthetic row keeps
(:mod:`privsyn_spark.schema.rules`, docs/rules.md).

Every field is checked against its column's dtype before anything reads the table: categorical
``values`` all of the dtype (``string`` reads numbers as text; without a dtype the values may not mix
strings and numbers), numerical bounds and edges finite numbers (dates for ``date``/``timestamp``),
``bins`` a whole number; unknown keys are refused (a typo would otherwise silently do nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from privsyn_spark.schema.columns import (
    CATEGORY_DTYPES,
    CATEGORY_POLICIES,
    NULL_POLICIES,
    NUMBER_DTYPES,
    NUMBER_POLICIES,
    CategoricalColumn,
    Column,
    NumericalColumn,
    SchemaError,
    integer_bin_bounds,
    uniform_edges,
    with_spike_bins,
)
from privsyn_spark.schema.instants import instant_seconds
from privsyn_spark.schema.rules import Rule, parse_rules
from privsyn_spark.schema.time_parts import TimestampColumn, timestamp_column

DEFAULT_MAX_COLUMN_CODES = 5000

TOP_KEYS = ("columns", "null_tokens", "max_column_codes", "reviewed", "draft", "privacy_unit", "rules", "people")
COLUMN_KEYS = {
    "categorical": ("name", "type", "dtype", "values", "unseen", "nulls", "hierarchy"),
    "numerical": ("name", "type", "dtype", "min", "max", "bins", "edges", "spikes", "out_of_range", "nulls"),
    "timestamp": ("name", "type", "dtype", "start", "end", "parts", "out_of_range", "nulls"),
    "drop": ("name", "type"),
}
"""The keys a schema document may use, at the top and per column type."""


def _unknown_keys(where: str, spec: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = [str(k) for k in spec if k not in allowed]
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {unknown} (allowed: {list(allowed)})")


def _whole_number(where: str, key: str, value: Any, minimum: int) -> int:
    """An int option: a whole number (2.7 or "16" are refused, not truncated) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise SchemaError(f"{where}: {key} must be a whole number, got {value!r}")
    if value < minimum:
        raise SchemaError(f"{where}: {key} must be >= {minimum}, got {value!r}")
    return int(value)


def parse_document(doc: Mapping[str, Any]) -> tuple[tuple[Column, ...], tuple[str, ...], tuple[str, ...], int,
                                                   tuple[Rule, ...]]:
    """Validate a schema document: ``(kept columns in table order, dropped names, null tokens,
    max_column_codes, rules)``; errors name the column (or the rule) and the problem."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("columns"), list) or not doc["columns"]:
        raise SchemaError("schema: expected a mapping with a non-empty 'columns' list")
    _unknown_keys("schema", doc, TOP_KEYS)
    max_codes = _whole_number("schema", "max_column_codes", doc.get("max_column_codes", DEFAULT_MAX_COLUMN_CODES), 1)
    kept: list[Column] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for spec in doc["columns"]:
        if not isinstance(spec, Mapping) or not spec.get("name"):
            raise SchemaError(f"schema: every column needs a 'name' (got {spec!r})")
        if not isinstance(spec["name"], str):
            raise SchemaError(f"schema: column names must be strings, got {spec['name']!r}")
        name = spec["name"]
        _check_name(name, spec.get("type") == "drop")
        if name in seen:
            raise SchemaError(f"column {name!r}: declared twice")
        seen.add(name)
        kind = spec.get("type")
        if kind in COLUMN_KEYS:
            _unknown_keys(f"column {name!r}", spec, COLUMN_KEYS[kind])
        if kind == "drop":
            dropped.append(name)
            continue
        if kind == "categorical":
            col: Column = _categorical(name, spec)
        elif kind == "numerical":
            col = _numerical(name, spec)
        elif kind == "timestamp":
            col = _timestamp(name, spec)
        else:
            raise SchemaError(f"column {name!r}: unknown type {kind!r} (use categorical, numerical, timestamp "
                              f"or drop)")
        measured = col.part_columns(set()) if isinstance(col, TimestampColumn) and col.split else (col,)
        codes = max(c.size for c in measured)  # a timestamp's parts are the attributes measured
        if codes > max_codes:
            raise SchemaError(f"column {name!r}: {codes} codes is too many cells (max_column_codes = "
                              f"{max_codes}); declare fewer values or bins, or drop the column")
        kept.append(col)
    if not kept:
        raise SchemaError("schema: every column is dropped; nothing to synthesize")
    tokens = doc.get("null_tokens") or []
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise SchemaError(f"schema: null_tokens must be a list of strings, got {tokens!r}")
    return tuple(kept), tuple(dropped), tuple(tokens), max_codes, parse_rules(doc.get("rules"), kept)


DELTA_REFUSED = " ,;{}()\n\t="
"""Characters a Delta table (without column mapping) refuses in a column name."""


def _check_name(name: str, dropped: bool) -> None:
    """Refuse a name the output cannot hold: a character Delta refuses, a dot (decode cannot quote it) or a
    backtick (nor can the input's SQL); a dropped column only needs to be readable."""
    if "`" in name:
        raise SchemaError(f"column {name!r}: a backtick in a column name is not supported; rename the column")
    if dropped:
        return
    bad = sorted({c for c in name if c in DELTA_REFUSED or c == "."})
    if bad:
        raise SchemaError(f"column {name!r}: a Delta table refuses the character(s) {bad} in a column name (a dot "
                          f"cannot be quoted); rename the column in the input, or drop it (type: drop)")


_FLOAT_MAX = float(np.finfo(np.float32).max)


def _check_dtype_range(name: str, dtype: str, edges: tuple[float, ...]) -> None:
    """The declared bounds must fit the output dtype, or the written values would wrap or overflow."""
    if dtype in _INT_RANGE:
        low, high = _INT_RANGE[dtype]
        lo, hi = float(np.ceil(edges[0])), float(np.floor(edges[-1]))
        if lo < low or hi > high:
            raise SchemaError(f"column {name!r}: bounds [{lo:g}, {hi:g}] exceed dtype {dtype} "
                              f"([{low}, {high}]); declare narrower bounds or dtype: long/double")
    elif dtype == "float" and max(abs(edges[0]), abs(edges[-1])) > _FLOAT_MAX:
        raise SchemaError(f"column {name!r}: bounds [{edges[0]:g}, {edges[-1]:g}] exceed dtype float "
                          f"(|x| <= {_FLOAT_MAX:g}); declare narrower bounds or dtype: double")


def _policy(name: str, spec: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = spec.get(key, allowed[0])
    if value not in allowed:
        raise SchemaError(f"column {name!r}: {key} must be one of {list(allowed)}, got {value!r}")
    return value


def _categorical(name: str, spec: Mapping[str, Any]) -> CategoricalColumn:
    values = spec.get("values")
    if not isinstance(values, list) or not values:
        raise SchemaError(f"column {name!r}: categorical needs a non-empty 'values' list")
    dtype = spec.get("dtype") or _guess_dtype(name, values)
    if dtype not in CATEGORY_DTYPES:
        raise SchemaError(f"column {name!r}: dtype {dtype!r} not one of {list(CATEGORY_DTYPES)}")
    values = [_category_value(name, dtype, v) for v in values]
    if len(set(map(repr, values))) != len(values):
        raise SchemaError(f"column {name!r}: 'values' has duplicates")
    return CategoricalColumn(name=name, dtype=dtype, nulls=_policy(name, spec, "nulls", NULL_POLICIES),
                             values=tuple(values), unseen=_policy(name, spec, "unseen", CATEGORY_POLICIES),
                             hierarchy=_hierarchy(name, dtype, spec.get("hierarchy")))


def _hierarchy(name: str, dtype: str, spec: Any) -> tuple[int, ...]:
    """A categorical ``hierarchy: {prefix: [3, 1]}``: string values, prefix lengths >= 1, longest first."""
    if spec is None:
        return ()
    lengths = spec.get("prefix") if isinstance(spec, Mapping) and set(spec) == {"prefix"} else None
    if not isinstance(lengths, list) or not lengths:
        raise SchemaError(f"column {name!r}: hierarchy must be {{prefix: [lengths, longest first]}}, got {spec!r}")
    lengths = [_whole_number(f"column {name!r}", "hierarchy prefix", n, 1) for n in lengths]
    if dtype != "string" or any(b >= a for a, b in zip(lengths, lengths[1:])):
        raise SchemaError(f"column {name!r}: hierarchy prefixes need string values and lengths longest first, "
                          f"got {lengths} ({dtype})")
    return tuple(lengths)


_INT_RANGE = {"int": (-2 ** 31, 2 ** 31 - 1), "long": (-2 ** 63, 2 ** 63 - 1)}


def _guess_dtype(name: str, values: list[Any]) -> str:
    if all(isinstance(v, bool) for v in values):
        return "boolean"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "long"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "double"
    if all(isinstance(v, str) for v in values):
        return "string"
    kinds = sorted({type(v).__name__ for v in values})
    raise SchemaError(f"column {name!r}: 'values' mix types {kinds}; make them one type or set dtype "
                      f"(dtype: string reads every value as text)")


def _category_value(name: str, dtype: str, value: Any) -> Any:
    """A declared category checked against (and for ``string``, converted to) the column's dtype."""
    bad = f"column {name!r}: value {value!r} is not of dtype {dtype}"
    if value is None:
        raise SchemaError(f"column {name!r}: null is not a category (nulls are handled by 'nulls')")
    if dtype == "string":
        if isinstance(value, (dict, list)):
            raise SchemaError(bad)
        return str(value)
    if dtype == "boolean":
        if not isinstance(value, bool):
            raise SchemaError(bad)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(bad)
    if dtype in _INT_RANGE:
        low, high = _INT_RANGE[dtype]
        if not float(value).is_integer() or not low <= value <= high:
            raise SchemaError(f"{bad} (a whole number in [{low}, {high}])")
        return int(value)
    if not np.isfinite(value):
        raise SchemaError(f"column {name!r}: value {value!r} is not a finite number")
    return float(value)


def _numerical(name: str, spec: Mapping[str, Any]) -> NumericalColumn:
    dtype = spec.get("dtype", "double")
    if dtype not in NUMBER_DTYPES:
        raise SchemaError(f"column {name!r}: dtype {dtype!r} not one of {list(NUMBER_DTYPES)}")
    integer = dtype in ("int", "long", "date", "timestamp")
    dated = dtype in ("date", "timestamp")
    if "edges" in spec:
        if "min" in spec or "max" in spec or "bins" in spec:
            raise SchemaError(f"column {name!r}: give either 'edges' or 'min'/'max'/'bins', not both")
        if not isinstance(spec["edges"], list):
            raise SchemaError(f"column {name!r}: edges must be a list, got {spec['edges']!r}")
        edges = tuple(_bound(name, "edges", e, dated) for e in spec["edges"])
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise SchemaError(f"column {name!r}: edges must be at least two strictly increasing numbers")
    else:
        if "min" not in spec or "max" not in spec:
            raise SchemaError(f"column {name!r}: numerical needs public bounds 'min' and 'max' (or 'edges')")
        lower, upper = _bound(name, "min", spec["min"], dated), _bound(name, "max", spec["max"], dated)
        if not lower < upper:
            raise SchemaError(f"column {name!r}: min ({spec['min']}) must be below max ({spec['max']})")
        if not np.isfinite(upper - lower):
            raise SchemaError(f"column {name!r}: max - min overflows a double; declare narrower bounds")
        bins = _whole_number(f"column {name!r}", "bins", spec.get("bins", 16), 1)
        edges = uniform_edges(lower, upper, bins, integer)
    _check_dtype_range(name, dtype, edges)
    if integer:
        lo, hi = integer_bin_bounds(np.asarray(edges))
        if np.any(lo > hi):
            raise SchemaError(f"column {name!r}: a bin holds no whole number; widen the edges")
    raw_spikes = spec.get("spikes") or []
    if not isinstance(raw_spikes, list):
        raise SchemaError(f"column {name!r}: spikes must be a list of values")
    try:
        spikes = tuple(sorted({float(instant_seconds(v)) for v in raw_spikes}))
        edges = with_spike_bins(edges, spikes, integer)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"column {name!r}: spikes: {exc}") from None
    return NumericalColumn(name=name, dtype=dtype, nulls=_policy(name, spec, "nulls", NULL_POLICIES),
                           edges=edges, out_of_range=_policy(name, spec, "out_of_range", NUMBER_POLICIES),
                           spikes=spikes)


def _timestamp(name: str, spec: Mapping[str, Any]) -> TimestampColumn:
    """A ``type: timestamp`` column (:mod:`privsyn_spark.schema.time_parts`): public days ``start``/``end``."""
    for key in ("start", "end"):
        if key not in spec:
            raise SchemaError(f"column {name!r}: type timestamp needs public days 'start' and 'end'")
    return timestamp_column(name, spec.get("dtype", "timestamp"), _bound(name, "start", spec["start"], True),
                            _bound(name, "end", spec["end"], True), spec.get("parts"),
                            _policy(name, spec, "nulls", NULL_POLICIES),
                            _policy(name, spec, "out_of_range", NUMBER_POLICIES))


def _bound(name: str, key: str, value: Any, dated: bool) -> float:
    """A finite bound (``min``, ``max`` or one of ``edges``): a number, or a date for date/timestamp columns."""
    import datetime as dt

    what = "a finite number or a date (ISO string)" if dated else "a finite number"
    if isinstance(value, bool) or (not dated and not isinstance(value, (int, float))) \
            or (dated and not isinstance(value, (int, float, str, dt.date))):
        raise SchemaError(f"column {name!r}: {key} must be {what}, got {value!r}")
    try:
        number = float(instant_seconds(value))
    except (TypeError, ValueError, OverflowError):
        raise SchemaError(f"column {name!r}: {key} must be {what}, got {value!r}") from None
    if not np.isfinite(number):
        raise SchemaError(f"column {name!r}: {key} must be finite, got {value!r} (bounds are public, "
                          f"declare the largest value the column may hold)")
    return number
