"""The report page's per-column rows: for each column, its 1-way TVD against the real table, for numeric
columns the KS distance, the rows compared and the shares of spike values, the estimate's fit to its noisy
1-way marginal and how its out-of-domain input was handled (report.json's ``metrics.tvd.tvd_1way``,
``metrics.values``, ``estimation.one_way_fit.attributes`` and ``domain_handling``, which the page shows
here and nowhere else). Each number is a :class:`Number`: the template tags it with its place in report.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from privsyn_spark.evaluate.report_html import at, attr_label

SHOWN = ("/metrics/tvd/tvd_1way", "/metrics/values", "/estimation/one_way_fit/attributes", "/domain_handling")
"""Parts of report.json the per-column table shows (the page's generic tables skip them)."""


@dataclass(frozen=True)
class Number:
    """A number of report.json and its JSON pointer (the template shows it tagged)."""

    value: int | float
    key: str


@dataclass
class ColumnRow:
    """What the page shows of one column (None: not reported for it)."""

    name: str
    tvd: Number | None = None
    ks: Number | None = None
    high: bool = False
    compared: tuple[Number, Number] | None = None  # rows compared: real, synthetic
    spikes: list[dict[str, Any]] = field(default_factory=list)  # value, declared, real, synthetic
    fit: tuple[Number, Number, Number | None] | None = None  # the estimate's 1-way TVD, the noise's, their ratio
    handling: list[tuple[str, Number | str]] = field(default_factory=list)  # domain handling, key by key


def number(report: Mapping, *keys: Any) -> Number | None:
    """The number at ``keys`` of ``report`` (None when it is missing or not a number)."""
    value, key = at(report, *keys)
    return Number(value, key) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _entries(report: Mapping, *keys: Any) -> Mapping:
    found = at(report, *keys)[0]
    return found if isinstance(found, Mapping) else {}


def _text(value: Any) -> str:
    return "\u2014" if value is None else ("yes" if value else "no") if isinstance(value, bool) else str(value)


def column_rows(report: Mapping) -> list[ColumnRow]:
    """One :class:`ColumnRow` per column any per-column part of ``report`` names, in their order."""
    one_way = _entries(report, "metrics", "tvd", "tvd_1way")
    values = _entries(report, "metrics", "values")
    fit = _entries(report, "estimation", "one_way_fit", "attributes")
    handling = _entries(report, "domain_handling")
    rows = []
    for column in dict.fromkeys([*one_way, *values, *fit, *handling]):
        row = ColumnRow(attr_label(str(column)), tvd=number(report, "metrics", "tvd", "tvd_1way", column))
        v = values.get(column) or {}
        row.ks, row.high = number(report, "metrics", "values", column, "ks"), bool(v.get("high_error"))
        real, synthetic = (number(report, "metrics", "values", column, "rows", side) for side in ("real", "synthetic"))
        row.compared = (real, synthetic) if real and synthetic else None
        row.spikes = [{"value": number(report, "metrics", "values", column, "spikes", i, "value"),
                       "declared": bool(s.get("declared")),
                       "real": number(report, "metrics", "values", column, "spikes", i, "real"),
                       "synthetic": number(report, "metrics", "values", column, "spikes", i, "synthetic")}
                      for i, s in enumerate(v.get("spikes") or [])]
        key = ("estimation", "one_way_fit", "attributes", column)
        tvd, noise = number(report, *key, "tvd"), number(report, *key, "noise_tvd")
        row.fit = (tvd, noise, number(report, *key, "ratio")) if tvd and noise else None
        row.handling = [(str(k), number(report, "domain_handling", column, k) or _text(h))
                        for k, h in (handling.get(column) or {}).items()]
        rows.append(row)
    return rows
