"""How many rows break each declared rule (:mod:`privsyn_spark.schema.rules`), in the real and synthetic tables.

The synthesizers keep every rule by construction, so the synthetic counts should all be 0; the real
counts are exact statistics of the private table (the report is for operators, NOT private). Rules on
codes (``derived_from``, ``implies``, ``forbid``, ``combinations``) are checked on the encoded columns,
``inequality`` on the values; each table is read once (one aggregation of a sum per rule).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from privsyn_spark.measure.encode import EncodedTable, code_column, numeric_value, raw_value
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.schema import Schema


def _broken_codes(encoded: EncodedTable, schema: Schema, rule: Any) -> Any:
    """Spark condition: the row's codes break ``rule`` (not an inequality)."""
    from pyspark.sql import functions as F

    def literal(values: Any) -> Any:
        return F.split(F.lit(",".join(str(int(v)) for v in values)), ",").cast("array<int>")

    columns = {c.name: c for c in schema.columns}
    if rule.kind == "derived_from":
        target, source = rule.columns
        derived = next(d for d in schema.view.derivations if d.column == target)
        return code_column(encoded.df, target) != F.element_at(literal(derived.codes), code_column(encoded.df,
                                                                                                     source) + 1)
    cell = F.lit(0)
    for name in rule.columns:
        cell = cell * F.lit(columns[name].size) + code_column(encoded.df, name)
    return F.element_at(literal(rule.allowed(columns).ravel()), cell.cast("int") + 1) == 0


def _broken_values(df: Any, schema: Schema, rule: Any) -> Any:
    """Spark condition: the row's values break the inequality ``rule`` (nulls break nothing)."""
    types = dict(df.dtypes)
    low, high = (schema.column(c) for c in rule.columns)
    assert isinstance(low, NumericalColumn) and isinstance(high, NumericalColumn)
    return (numeric_value(raw_value(schema, low), low, types[low.name])
            > numeric_value(raw_value(schema, high), high, types[high.name]))


def _count(df: Any, conditions: list) -> list[int]:
    from pyspark.sql import functions as F

    if not conditions:
        return []
    row = df.agg(*[F.sum(F.when(c, 1).otherwise(0)).alias(f"r{i}") for i, c in enumerate(conditions)]).collect()[0]
    return [int(v or 0) for v in row]


def rule_violations(schema: Schema, real: EncodedTable, synthetic: EncodedTable, synthetic_values: Any,
                    real_values: Any = None) -> dict[str, Any]:
    """``{"rules": [{rule, type, synthetic_violations, real_violations}], "synthetic_violations": total}``.

    ``synthetic_values`` / ``real_values``: the raw tables (inequalities are checked on values; without
    ``real_values`` the real side of an inequality is None)."""
    rules = list(enumerate(schema.rules))
    counts: dict[str, dict[int, int]] = {}
    for side, encoded, raw in (("synthetic", synthetic, synthetic_values), ("real", real, real_values)):
        codes = [(i, _broken_codes(encoded, schema, r)) for i, r in rules if r.kind != "inequality"]
        found = dict(zip([i for i, _ in codes], _count(encoded.df, [c for _, c in codes])))
        if raw is not None:
            values = [(i, _broken_values(raw, schema, r)) for i, r in rules if r.kind == "inequality"]
            found.update(zip([i for i, _ in values], _count(raw, [c for _, c in values])))
        counts[side] = found
    rows = [{"rule": r.label(), "type": r.kind, "synthetic_violations": counts["synthetic"].get(i),
             "real_violations": counts["real"].get(i)} for i, r in rules]
    return {"rules": rows, "synthetic_violations": sum(r["synthetic_violations"] or 0 for r in rows),
            "note": "rows breaking each declared rule; the real counts are exact statistics of the private table"}


def rules_table(metrics: Mapping[str, Any]) -> str:
    """The report's HTML table of :func:`rule_violations` (empty without rules)."""
    found = metrics.get("rules") if isinstance(metrics, Mapping) else None
    if not isinstance(found, Mapping) or not found.get("rules"):
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(r['rule']))}</td><td>{r['synthetic_violations']}</td>"
                   f"<td>{'&mdash;' if r['real_violations'] is None else r['real_violations']}</td></tr>"
                   for r in found["rules"])
    return ("<h3>Declared rules</h3><table><tr><th>rule</th><th>synthetic rows breaking it</th>"
            f"<th>real rows breaking it</th></tr>{rows}</table>")
