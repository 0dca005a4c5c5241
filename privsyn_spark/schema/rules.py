"""Declared rules: public knowledge about the table that every synthetic row keeps (no budget spent).

A schema document may list ``rules`` (see docs/rules.md)::

    rules:
      - {type: derived_from, column: educational-num, source: education, mapping: {Bachelors: 13, ...}}
      - {type: implies, if: {relationship: Husband}, then: {gender: Male}}
      - {type: forbid, cells: {relationship: Wife, gender: Male}}
      - {type: combinations, columns: [a, b], allowed: [[x1, y1], [x2, y2]]}
      - {type: inequality, low: start, high: end}            # start <= end

Rules are declared by the operator, never read from the data. This module parses and checks them
against the columns (one-line :class:`SchemaError` before anything reads the table) and turns each
into what the synthesis works with: a ``derived_from`` rule into a code map (source code -> value
and code of the derived column), every other rule into a mask of the allowed cells over its
columns' codes (:meth:`Rule.allowed`). :mod:`privsyn_spark.schema.synthesis_view` builds the domain
the synthesizers see from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn, SchemaError, integer_bin_bounds

RULE_TYPES = ("derived_from", "implies", "forbid", "combinations", "inequality")
RULE_KEYS = {"derived_from": ("type", "column", "source", "mapping"), "implies": ("type", "if", "then"),
             "forbid": ("type", "cells"), "combinations": ("type", "columns", "allowed"),
             "inequality": ("type", "low", "high")}
"""The keys each rule type takes."""


@dataclass(frozen=True)
class Rule:
    """One declared rule (see the module docstring); ``spec`` is its document form, as given."""

    kind: str
    columns: tuple[str, ...]
    """The columns the rule names (for ``derived_from``: the derived column, then its source)."""
    spec: Mapping[str, Any]

    def label(self) -> str:
        """A short human-readable form, e.g. ``relationship=Husband => gender=Male``."""
        s = self.spec
        if self.kind == "derived_from":
            return f"{s['column']} derived from {s['source']}"
        if self.kind == "implies":
            return f"{_conditions(s['if'])} => {_conditions(s['then'])}"
        if self.kind == "forbid":
            return f"never {_conditions(s['cells'])}"
        if self.kind == "combinations":
            return f"({', '.join(s['columns'])}) in {len(s['allowed'])} declared combinations"
        return f"{s['low']} <= {s['high']}"

    def allowed(self, columns: Mapping[str, Column]) -> np.ndarray:
        """Boolean mask over the codes of :attr:`columns` (axes in that order): True where a row may be.

        Codes a rule cannot name (``other``, null) are allowed by ``forbid`` and ``inequality``; an
        ``implies`` rule's ``then`` and a ``combinations`` rule allow only the values they list.
        """
        cols = [columns[c] for c in self.columns]
        shape = tuple(c.size for c in cols)
        if self.kind == "forbid":
            return ~_holds(self.spec["cells"], self.columns, cols, shape)
        if self.kind == "implies":
            return ~_holds(self.spec["if"], self.columns, cols, shape) | _holds(self.spec["then"], self.columns,
                                                                                  cols, shape)
        if self.kind == "combinations":
            mask = np.zeros(shape, dtype=bool)
            for combo in self.spec["allowed"]:
                mask[tuple(_code(c, v) for c, v in zip(cols, combo))] = True
            return mask
        if self.kind == "inequality":
            low, high = cols
            assert isinstance(low, NumericalColumn) and isinstance(high, NumericalColumn)  # checked when parsed
            lo_min, _ = bin_value_bounds(low)
            _, hi_max = bin_value_bounds(high)
            mask = np.ones(shape, dtype=bool)
            mask[:low.base_size, :high.base_size] = lo_min[:, None] <= hi_max[None, :]
            return mask
        raise ValueError(f"rule {self.kind!r} has no mask (derived columns are generated)")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **{k: v for k, v in self.spec.items() if k != "type"}}


def bin_value_bounds(column: NumericalColumn) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest value each bin of ``column`` decodes to (a spike bin: its one value)."""
    edges = column.edge_array()
    if column.integer:
        lo, hi = integer_bin_bounds(edges)
        return lo.astype(np.float64), hi.astype(np.float64)
    lo, hi = edges[:-1].copy(), np.nextafter(edges[1:], -np.inf)
    hi[-1] = edges[-1]
    for code, value in column.spike_codes().items():
        lo[code] = hi[code] = value
    return lo, hi


@dataclass(frozen=True)
class Derivation:
    """A ``derived_from`` rule resolved on codes: ``codes[source code]`` is the derived column's code,
    ``values[source code]`` the value it decodes to (None: null)."""

    column: str
    source: str
    codes: np.ndarray
    values: tuple[Any, ...]


def parse_rules(raw: Any, columns: Sequence[Column]) -> tuple[Rule, ...]:
    """Validate the document's ``rules`` list against the kept ``columns`` (errors name the rule)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SchemaError(f"schema: rules must be a list, got {raw!r}")
    by_name = {c.name: c for c in columns}
    rules = [_parse_rule(i, spec, by_name) for i, spec in enumerate(raw)]
    derivations(rules, by_name)  # cycles, a column derived twice
    derived = {r.spec["column"] for r in rules if r.kind == "derived_from"}
    for i, r in enumerate(rules):
        if r.kind == "inequality" and derived & set(r.columns):
            raise SchemaError(f"rules[{i}] ({r.label()}): an inequality cannot name a derived column")
    return tuple(rules)


def derivations(rules: Sequence[Rule], columns: Mapping[str, Column]) -> list[Derivation]:
    """The ``derived_from`` rules as code maps, in an order where a source comes before what it derives."""
    derived = {}
    for r in rules:
        if r.kind != "derived_from":
            continue
        if r.spec["column"] in derived:
            raise SchemaError(f"rules: column {r.spec['column']!r} is derived twice")
        derived[r.spec["column"]] = r
    ordered: list[Derivation] = []
    state: dict[str, int] = {}  # 1: being resolved, 2: done

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == 2 or name not in derived:
            return
        if state.get(name) == 1:
            raise SchemaError(f"rules: derived_from has a cycle: {' -> '.join(path + (name,))}")
        state[name] = 1
        rule = derived[name]
        visit(rule.spec["source"], path + (name,))
        state[name] = 2
        ordered.append(_derivation(rule, columns))

    for name in derived:
        visit(name, ())
    return ordered


# ------------------------------------------------------------------------------------------ parsing


def _parse_rule(i: int, spec: Any, columns: Mapping[str, Column]) -> Rule:
    where = f"rules[{i}]"
    if not isinstance(spec, Mapping) or spec.get("type") not in RULE_TYPES:
        got = spec.get("type") if isinstance(spec, Mapping) else spec
        raise SchemaError(f"{where}: type must be one of {list(RULE_TYPES)}, got {got!r}")
    kind = spec["type"]
    unknown = [str(k) for k in spec if k not in RULE_KEYS[kind]]
    missing = [k for k in RULE_KEYS[kind] if k not in spec]
    if unknown or missing:
        raise SchemaError(f"{where} ({kind}): " + (f"unknown key(s) {unknown}" if unknown else f"needs {missing}")
                          + f" (keys: {list(RULE_KEYS[kind])})")

    def column(name: Any) -> Column:
        if not isinstance(name, str) or name not in columns:
            raise SchemaError(f"{where} ({kind}): {name!r} is not a kept column of the schema")
        return columns[name]

    if kind == "derived_from":
        target, source = column(spec["column"]), column(spec["source"])
        if target.name == source.name:
            raise SchemaError(f"{where}: column {target.name!r} cannot be derived from itself")
        if not isinstance(spec["mapping"], Mapping):
            raise SchemaError(f"{where}: mapping must be a mapping of {source.name!r} values to {target.name!r} values")
        return Rule(kind, (target.name, source.name), dict(spec))
    if kind == "inequality":
        low, high = column(spec["low"]), column(spec["high"])
        for c in (low, high):
            if not isinstance(c, NumericalColumn):
                raise SchemaError(f"{where}: inequality columns must be numerical, {c.name!r} is {c.kind}")
        if low.name == high.name or (low.dtype in ("date", "timestamp")) != (high.dtype in ("date", "timestamp")):
            raise SchemaError(f"{where}: inequality needs two different columns, both dates/timestamps or both numbers")
        return Rule(kind, (low.name, high.name), dict(spec))
    if kind == "combinations":
        names = spec["columns"]
        if not isinstance(names, list) or len(names) < 2 or len(set(map(str, names))) != len(names):
            raise SchemaError(f"{where}: columns must list at least two different columns")
        cols = [_categorical(where, column(n)) for n in names]
        allowed = spec["allowed"]
        if not isinstance(allowed, list) or not allowed:
            raise SchemaError(f"{where}: allowed must be a non-empty list of combinations")
        for combo in allowed:
            if not isinstance(combo, list) or len(combo) != len(cols):
                raise SchemaError(f"{where}: every allowed combination lists {len(cols)} values, got {combo!r}")
            for c, v in zip(cols, combo):
                _check_value(where, c, v)
        return Rule(kind, tuple(names), dict(spec))
    keys = ("if", "then") if kind == "implies" else ("cells",)
    named: list[str] = []
    for key in keys:
        conds = spec[key]
        if not isinstance(conds, Mapping) or not conds:
            raise SchemaError(f"{where}: {key} must map columns to a value or a list of values")
        for name, values in conds.items():
            c = _categorical(where, column(name))
            if name in named:
                raise SchemaError(f"{where}: column {name!r} is in both 'if' and 'then'")
            named.append(name)
            for v in values if isinstance(values, list) else [values]:
                _check_value(where, c, v)
    return Rule(kind, tuple(named), dict(spec))


def _categorical(where: str, column: Column) -> CategoricalColumn:
    if not isinstance(column, CategoricalColumn):
        raise SchemaError(f"{where}: column {column.name!r} is {column.kind}; this rule names categorical "
                          f"columns only (use inequality for numbers)")
    return column


def _check_value(where: str, column: CategoricalColumn, value: Any) -> None:
    if _find(column, value) is None:
        raise SchemaError(f"{where}: {value!r} is not a declared value of column {column.name!r}")


def _find(column: CategoricalColumn, value: Any) -> int | None:
    for i, v in enumerate(column.values):
        if v == value or (column.dtype == "string" and str(value) == v and not isinstance(value, (dict, list))):
            return i
    return None


def _code(column: Column, value: Any) -> int:
    code = _find(column, value) if isinstance(column, CategoricalColumn) else None
    assert code is not None  # checked when parsed
    return code


def _holds(conds: Mapping[str, Any], names: Sequence[str], cols: Sequence[Column],
           shape: tuple[int, ...]) -> np.ndarray:
    """Mask over ``shape``: True where every condition of ``conds`` holds."""
    mask = np.ones(shape, dtype=bool)
    for name, values in conds.items():
        axis = list(names).index(name)
        col = cols[axis]
        hit = np.zeros(col.size, dtype=bool)
        hit[[_code(col, v) for v in (values if isinstance(values, list) else [values])]] = True
        mask &= hit.reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return mask


def _conditions(conds: Mapping[str, Any]) -> str:
    return " and ".join(f"{k}={v}" if not isinstance(v, list) else f"{k} in {v}" for k, v in conds.items())


def _derivation(rule: Rule, columns: Mapping[str, Column]) -> Derivation:
    """Code map of one ``derived_from`` rule; the source's ``other`` and null codes derive a null."""
    where = f"rules ({rule.label()})"
    target, source = columns[rule.spec["column"]], columns[rule.spec["source"]]
    if not isinstance(source, CategoricalColumn):
        raise SchemaError(f"{where}: the source {source.name!r} must be categorical (its values are the "
                          f"mapping's keys)")
    mapping = rule.spec["mapping"]
    keys = {_find(source, k): k for k in mapping}
    if None in keys:
        bad = [k for k in mapping if _find(source, k) is None]
        raise SchemaError(f"{where}: mapping key(s) {bad} are not declared values of {source.name!r}")
    missing = [v for i, v in enumerate(source.values) if i not in keys]
    if missing:
        raise SchemaError(f"{where}: the mapping does not cover the source's values {missing}")
    extra = source.size - len(source.values)
    if extra and target.null_code is None:
        raise SchemaError(f"{where}: {source.name!r} can be null or 'other' (a null {target.name!r} then), but "
                          f"{target.name!r} has no null value (nulls: {target.nulls}); declare {source.name!r} "
                          f"unseen: fail and nulls: none, or {target.name!r} nulls: value")
    codes, values = [], []
    for i in range(len(source.values)):
        value = mapping[keys[i]]
        codes.append(_target_code(where, target, value))
        values.append(_target_value(target, value))
    codes += [int(target.null_code or 0)] * extra  # checked above: there is a null code when extra
    values += [None] * extra
    return Derivation(target.name, source.name, np.asarray(codes, dtype=np.int64), tuple(values))


def _target_code(where: str, target: Column, value: Any) -> int:
    if isinstance(target, CategoricalColumn):
        code = _find(target, value)
        if code is None:
            raise SchemaError(f"{where}: {value!r} is not a declared value of {target.name!r}")
        return code
    assert isinstance(target, NumericalColumn)
    if target.dtype in ("date", "timestamp"):
        raise SchemaError(f"{where}: a derived column is categorical or a number column, not {target.dtype}")
    edges = target.edge_array()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not edges[0] <= value <= edges[-1] \
            or (target.integer and float(value) != round(value)):
        raise SchemaError(f"{where}: {value!r} is not a {'whole ' if target.integer else ''}number inside "
                          f"[{edges[0]:g}, {edges[-1]:g}] of {target.name!r}")
    return int(min(np.searchsorted(edges, value, side="right") - 1, len(edges) - 2))


def _target_value(target: Column, value: Any) -> Any:
    if isinstance(target, CategoricalColumn):
        return target.values[_code(target, value)]
    assert isinstance(target, NumericalColumn)
    return int(value) if target.integer else float(value)
