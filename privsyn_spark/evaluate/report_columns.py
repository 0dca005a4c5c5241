"""The report page's per-column table: each column's 1-way TVD against the real table and, for numeric
columns, the KS distance, the rows compared and the shares of spike values, one row per column in a
collapsed block (report.json's ``metrics.tvd.tvd_1way`` and ``metrics.values``, which the page shows
here and nowhere else). Every number is tagged with its place in report.json, as the rest of the page."""

from __future__ import annotations

import html
from collections.abc import Mapping

from privsyn_spark.evaluate.report_html import at, attr_label, n

SHOWN = ("/metrics/tvd/tvd_1way", "/metrics/values")
"""Parts of report.json this table shows (the page's generic tables skip them)."""


def collapsed(summary: str, body: str) -> str:
    """``body`` in a closed ``<details>`` block titled ``summary`` (HTML)."""
    return f"<details><summary>{summary}</summary>{body}</details>"


def _spikes(report: Mapping, column: str, spikes: list) -> str:
    key = ("metrics", "values", column, "spikes")
    return "<br>".join(f"{n(report, *key, i, 'value')}{' (declared)' if s.get('declared') else ''}: "
                       f"{n(report, *key, i, 'real')} real vs {n(report, *key, i, 'synthetic')} synthetic"
                       for i, s in enumerate(spikes))


def column_table(report: Mapping) -> str:
    """One row per column (1-way TVD; KS distance, rows and spike shares of numeric columns), collapsed."""
    one_way = at(report, "metrics", "tvd", "tvd_1way")[0] or {}
    values = at(report, "metrics", "values")[0] or {}
    columns = list(dict.fromkeys([*one_way, *values]))
    if not columns:
        return ""
    rows = []
    for column in columns:
        v = values.get(column) or {}
        tvd = n(report, "metrics", "tvd", "tvd_1way", column) if column in one_way else "&mdash;"
        ks = n(report, "metrics", "values", column, "ks") if "ks" in v else "&mdash;"
        flag = ' <span class="flag">high</span>' if v.get("high_error") else ""
        counted = v.get("rows") or {}
        compared = (f"{n(report, 'metrics', 'values', column, 'rows', 'real')} real, "
                    f"{n(report, 'metrics', 'values', column, 'rows', 'synthetic')} synthetic"
                    if {"real", "synthetic"} <= set(counted) else "&mdash;")
        rows.append(f"<tr><th>{html.escape(attr_label(column))}</th><td>{tvd}</td><td>{ks}{flag}</td>"
                    f"<td>{compared}</td><td>{_spikes(report, column, v.get('spikes') or [])}</td></tr>")
    table = ("<table><tr><th>column</th><th>1-way TVD</th><th>KS distance</th><th>values compared</th>"
             "<th>share of spike / most frequent values</th></tr>" + "".join(rows) + "</table>")
    return collapsed(f"{len(columns)} columns: 1-way TVD; KS distance and spike shares of numeric columns", table)
