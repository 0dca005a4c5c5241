"""The run report: ``report.json`` (machine-readable) and ``report.html`` (static, no server needed).

The HTML is rendered from the same JSON-ready dict that is written to ``report.json``, with the Jinja2
template ``templates/report.html.j2`` (autoescaped): the verdict and summary, then one row per column
(:mod:`privsyn_spark.evaluate.report_columns`), then each section's other parts. Every number it shows
carries ``data-key`` (a JSON pointer into report.json) and ``data-value`` (the JSON value), so the two can
be checked against each other. Plots are matplotlib PNGs embedded as data URIs; they
need the ``report`` extra (``pip install 'privsyn-spark[report]'``): without matplotlib the page says
so in place of the plots, and everything else is written.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from privsyn_spark.evaluate.evaluation import NOTICE
from privsyn_spark.evaluate.report_columns import SHOWN, column_rows
from privsyn_spark.evaluate.report_html import at as _at
from privsyn_spark.evaluate.report_html import attr_label, format_number
from privsyn_spark.evaluate.report_html import n as _n
from privsyn_spark.evaluate.report_html import num as _num
from privsyn_spark.evaluate.report_html import pointer as _pointer
from privsyn_spark.evaluate.report_plots import budget_plot, heatmap_plot, histogram_plots, rounds_plot, value_plots
from privsyn_spark.evaluate.rule_checks import rules_table
from privsyn_spark.evaluate.verdict import verdict, verdict_html
from privsyn_spark.jsonable import to_jsonable

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
SECTIONS = ("run", "budget", "selection", "estimation", "synthesis", "domain_handling", "privacy_unit", "timings",
            "metrics")
PLOTTED = {"/metrics/distributions", "/metrics/tvd_2way_matrix"}  # shown as plots, not tables
PLOTS_MISSING = ("Plots are not shown: they need matplotlib, which is not installed "
                 "(pip install 'privsyn-spark[report]').")
PLOTTED_SUFFIXES = ("/histogram",)  # per-column value histograms (metrics/values/<column>/histogram)


def is_plotted(pointer: str) -> bool:
    """Whether the part of report.json at ``pointer`` is shown as a plot rather than as numbers."""
    return pointer in PLOTTED or pointer.endswith(PLOTTED_SUFFIXES)


FOLD_ROWS = 20  # longer lists are folded into <details>

def _fold(rows: int, body: str) -> str:
    return collapsed(f"{rows} rows", body) if rows > FOLD_ROWS else body


def collapsed(summary: str, body: str) -> str:
    """``body`` in a closed ``<details>`` block titled ``summary`` (HTML)."""
    return f"<details><summary>{summary}</summary>{body}</details>"


def _tuple(items: list, path: str) -> str:
    """A short list (an attribute tuple) on one line; rule groups' compound names readable."""
    return " &times; ".join(html.escape(attr_label(v)) if isinstance(v, str) else _value(v, _pointer(path, i))
                            for i, v in enumerate(items))


def _value(obj: Any, path: str) -> str:
    """Any JSON value as HTML: dicts as key/value tables, lists of dicts as tables, numbers tagged."""
    if isinstance(obj, bool):
        return '<span class="flag">yes</span>' if path.endswith("/flag") and obj else ("yes" if obj else "no")
    if isinstance(obj, (int, float)):
        return _num(obj, path)
    if obj is None:
        return "&mdash;"
    if isinstance(obj, str):
        return html.escape(attr_label(obj))
    if isinstance(obj, Mapping):
        rows = "".join(f"<tr><th>{html.escape(attr_label(str(k)))}</th><td>{_value(v, _pointer(path, k))}</td></tr>"
                       for k, v in obj.items() if not is_plotted(_pointer(path, k)) and _pointer(path, k) not in SHOWN)
        return _fold(len(obj), f"<table>{rows}</table>") if rows else "&mdash;"
    if obj and all(isinstance(v, Mapping) for v in obj):
        columns = list(dict.fromkeys(k for v in obj for k in v))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{_value(v[c], _pointer(_pointer(path, i), c)) if c in v else ''}</td>"
                                        for c in columns) + "</tr>" for i, v in enumerate(obj))
        return _fold(len(obj), f"<table><tr>{head}</tr>{body}</table>")
    if obj and all(isinstance(v, list) for v in obj):  # e.g. selected pairs: one row each
        body = "".join(f"<tr><td>{i + 1}</td><td>{_tuple(v, _pointer(path, i))}</td></tr>" for i, v in enumerate(obj))
        return _fold(len(obj), f"<table>{body}</table>")
    return ", ".join(_value(v, _pointer(path, i)) for i, v in enumerate(obj)) if obj else "&mdash;"


_HEADLINES = (
    ("epsilon", ("budget", "epsilon")), ("delta", ("budget", "delta")), ("rho (zCDP)", ("budget", "rho")),
    ("synthetic rows", ("synthesis", "rows")),
    ("1-way TVD (mean)", ("metrics", "tvd", "tvd_1way_mean")),
    ("2-way TVD (mean)", ("metrics", "tvd", "tvd_2way_mean")),
    ("2-way TVD (max)", ("metrics", "tvd", "tvd_2way_max")),
    ("range queries: mean abs error", ("metrics", "range_queries", "mean_abs_error")),
    ("ML accuracy, trained on synthetic", ("metrics", "ml_efficacy", "accuracy_synthetic")),
    ("ML accuracy, trained on real", ("metrics", "ml_efficacy", "accuracy_real")),
    ("ML accuracy, majority class", ("metrics", "ml_efficacy", "majority_accuracy")),
    ("exact-match share: synthetic vs all real rows", ("metrics", "privacy_smoke", "synthetic_match_share")),
    ("exact-match share: synthetic vs the rest", ("metrics", "privacy_smoke", "synthetic_match_share_rest")),
    ("exact-match share: held-out real vs the rest", ("metrics", "privacy_smoke", "holdout_match_share")),
    ("exact-match excess flagged", ("metrics", "privacy_smoke", "flag")),
)


def _summary(report: Mapping) -> list[tuple[str, Markup]]:
    """The headline numbers (title, tagged value), linked to their place in report.json."""
    rows = []
    for title, keys in _HEADLINES:
        node: Any = report
        path = ""
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
            path = _pointer(path, key)
        if node is not None:
            rows.append((title, Markup(_value(node, path))))
    return rows


_GUIDE = """<ul>
<li><b>TVD</b>: total-variation distance between the real and synthetic distributions of a marginal (half the
L1 distance of the normalised counts): 0 is identical, 1 is disjoint. Averaged over all 1-way and 2-way marginals.</li>
<li><b>Range queries</b> (as in the PrivSyn paper): random queries over 3 attributes with a random interval of codes
per attribute; the error is the absolute difference of the fractions of rows they select.</li>
<li><b>ML efficacy</b>: a classifier trained on the synthetic table and one trained on the real training part, both
tested on the same held-out real rows, beside always predicting the majority class.</li>
<li><b>Value level</b> (numeric columns): the Kolmogorov-Smirnov distance of the real and synthetic values
(the largest gap between their cumulative distributions; binned TVDs cannot see values misplaced inside a bin) and
the share of each spike value (and of the most frequent real value) in both tables.</li>
<li><b>Independent baseline</b>: the 2-way TVD of a table whose columns are independent, with the synthetic
table's 1-way marginals (their product): what a method that keeps no dependence would score.</li>
<li><b>Privacy smoke check</b>: the share of synthetic rows equal (on all codes) to a real row, beside the same
share for held-out real rows against the rest of the real table. A flagged excess suggests copied records; no flag
proves nothing: the guarantee is the differential privacy of the measurements.</li>
</ul>"""


def _ledger(report: Mapping) -> str:
    """The dataset's ledger after the run, in rho and epsilon (or why it is not shown)."""
    ledger = _at(report, "budget", "dataset_ledger")[0]
    if "budget" not in report:
        return ("<p><b>Ledger.</b> Not shown: this page was made without the model (<code>evaluate(real, "
                "synthetic, schema, model=model)</code> shows the run's budget and the dataset's ledger).</p>")
    if not isinstance(ledger, Mapping):
        return "<p><b>Ledger.</b> No budget ledger was used: other runs on this table are not counted.</p>"
    key = ("budget", "dataset_ledger")
    spent = f"rho {_n(report, *key, 'spent_rho')}"
    if ledger.get("spent_epsilon") is not None:
        spent += f" (epsilon {_n(report, *key, 'spent_epsilon')} at delta {_n(report, *key, 'budget_delta')})"
    if ledger.get("budget_rho") is None:
        left = "no budget is set"
    else:
        left = f"rho {_n(report, *key, 'left_rho')} of {_n(report, *key, 'budget_rho')} is left"
        if ledger.get("left_epsilon") is not None:
            left += (f" (epsilon {_n(report, *key, 'left_epsilon')} of {_n(report, *key, 'budget_epsilon')} at "
                     f"delta {_n(report, *key, 'budget_delta')})")
    scope = f", partition {html.escape(str(ledger['partition']))}" if ledger.get("partition") else ""
    return (f"<p><b>Ledger.</b> After this run the dataset <i>{html.escape(str(ledger.get('dataset_id') or ''))}</i>"
            f"{scope} has spent {spent} in total over all runs and drafts; {left}.</p>")


def _verdict(report: Mapping) -> str:
    """The opening section: the fit-for-use call and its checks, the budget in plain words, the ledger,
    warnings and notes; the box's colour follows the call (:mod:`privsyn_spark.evaluate.verdict`)."""
    eps = _at(report, "budget", "epsilon")[0]
    call = verdict(report)
    parts = ["<h2 id=\"verdict\">Verdict</h2>",
             f'<div class="verdict verdict-{call.colour}" data-call="{html.escape(call.call)}">', verdict_html(call)]
    if eps is not None:
        parts.append(f"<p><b>Budget.</b> This run spent epsilon = {_n(report, 'budget', 'epsilon')}, delta = "
                     f"{_n(report, 'budget', 'delta')} (rho = {_n(report, 'budget', 'spent_rho')} zCDP) on "
                     f"<i>{html.escape(str(_at(report, 'run', 'dataset')[0] or ''))}</i>. It protects every single "
                     "record: adding or removing any one row changes the probability of any output by at most a "
                     f"factor e<sup>epsilon</sup>, except with probability delta.</p>")
    parts.append(_ledger(report))
    return "".join(parts) + "</div>"


def _marginals_table(report: Mapping) -> str:
    rows = []
    for i, m in enumerate(_at(report, "selection", "marginals")[0] or []):
        rows.append(f"<tr><td>{_tuple(list(m.get('attrs', [])), _pointer('/selection/marginals', i))}</td>"
                    f"<td>{_n(report, 'selection', 'marginals', i, 'cells')}</td>"
                    f"<td>{_n(report, 'selection', 'marginals', i, 'rho')}</td>"
                    f"<td>{_n(report, 'selection', 'marginals', i, 'sigma')}</td></tr>")
    if not rows:
        return ""
    return _fold(len(rows), "<table><tr><th>attributes</th><th>cells</th><th>rho</th><th>sigma (noise sd)</th></tr>"
                 + "".join(rows) + "</table>")


def _timings_table(report: Mapping) -> str:
    timings = _at(report, "timings")[0] or {}
    rows = "".join(f"<tr><th>{html.escape(step)}</th><td>{_n(report, 'timings', step)} s</td></tr>"
                   for step in timings)
    return f"<table><tr><th>step</th><th>wall time</th></tr>{rows}</table>" if rows else ""


_TITLES = {"metrics": "Metrics (binned and value-level)", "selection": "Measured marginals"}


def _metrics(report: Mapping, metrics: Mapping, plots: bool) -> str:
    """The metrics below the guide: each part in its own collapsed block (its plain values in one small
    table; the per-column parts are in the page's per-column table), the 2-way heat map and the per-column
    plots collapsed too."""
    parts = []
    if plots and metrics.get("values"):
        parts.append(collapsed("Value histograms of numeric columns", "".join(value_plots(metrics["values"]))))
    if plots and metrics.get("distributions"):
        parts.append(collapsed("Real vs synthetic distributions, per column",
                               "".join(histogram_plots(metrics["distributions"]))))
    plain = {k: v for k, v in metrics.items() if not isinstance(v, (Mapping, list))}
    parts.append("<h3>Other metrics</h3>" + _value(plain, "/metrics"))
    for key, body in metrics.items():
        path = _pointer("/metrics", key)
        if key in plain or is_plotted(path) or path in SHOWN:
            continue
        parts.append(collapsed(html.escape(key.replace("_", " ")), _value(body, path)))
    matrix = metrics.get("tvd_2way_matrix")
    if plots and isinstance(matrix, Mapping) and len(matrix.get("attrs", ())) > 1:
        parts.append("<h3>2-way TVD</h3>" + heatmap_plot(matrix))
    return "".join(parts)


_PAGE = Environment(loader=PackageLoader("privsyn_spark.evaluate", "templates"), autoescape=True,
                    undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_PAGE.filters.update(number=format_number, json=json.dumps)


def _title(section: str) -> str:
    return _TITLES.get(section, section.replace("_", " ").capitalize())


def _section(report: Mapping, section: str, plots: bool) -> str:
    """One section's body below its heading (HTML): its plots and tables, its per-column parts left out."""
    body, parts = report[section], []
    if plots and section == "budget" and isinstance(body, Mapping) and body.get("ledger"):
        parts.append(budget_plot(body["ledger"]))
    if section == "selection":
        parts.append(_marginals_table(report))
    if section == "timings":
        return "".join(parts) + _timings_table(report)
    if plots and section == "synthesis" and isinstance(body, Mapping) and body.get("rounds"):
        parts.append(rounds_plot(body["rounds"]))
    if section == "metrics" and isinstance(body, Mapping):
        return "".join(parts) + _GUIDE + rules_table(body) + _metrics(report, body, plots)
    return "".join(parts) + _value(body, _pointer("", section))


def render_html(report: Mapping) -> str:
    """The report as one self-contained HTML page (``report`` as returned by ``to_jsonable``)."""
    run = report.get("run") or {}
    title = f"privsyn-spark run report: {run.get('dataset') or ''} {run.get('run_id') or ''}".strip()
    sections = [k for k in list(SECTIONS) + [k for k in report if k not in SECTIONS]
                if k in report and k != "verdict" and _pointer("", k) not in SHOWN]
    columns = column_rows(report)
    toc = [("verdict", "Verdict"), ("summary", "Summary")] + ([("columns", "Per column")] if columns else []) + [
        (k, _title(k)) for k in sections]
    plots = importlib.util.find_spec("matplotlib") is not None
    return _PAGE.get_template("report.html.j2").render(
        title=title, notice=NOTICE, toc=toc, verdict=Markup(_verdict(report)), summary=_summary(report),
        plots_missing=None if plots else PLOTS_MISSING, columns=columns,
        sections=[{"id": k, "title": _title(k), "body": Markup(_section(report, k, plots))} for k in sections])


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def report_json(report: Mapping) -> str:
    """The text of report.json: ``report`` with its ``verdict`` (the call, for a pipeline to gate on)."""
    doc = to_jsonable(report)
    doc["verdict"] = verdict(doc).to_dict()
    return json.dumps(doc, indent=1, allow_nan=False)


def write_report(report: Mapping, folder: str | Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = report_json(report)
    json_path, html_path = folder / REPORT_JSON, folder / REPORT_HTML
    _write_atomic(json_path, text)
    _write_atomic(html_path, render_html(json.loads(text)))
    return json_path, html_path
