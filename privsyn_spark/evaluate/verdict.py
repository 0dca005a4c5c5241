"""The report's verdict: a fit-for-use call with stated thresholds, the warnings and the notes.

The call reads the report only (the metrics of the synthetic table against the real one, which are
NOT private: the report is the operator's). Four checks, each ``fit``, ``care`` or ``not fit``:

| check | fit for use | use with care | not fit |
|---|---|---|---|
| mean 2-way TVD / the independent-columns baseline's | <= 0.5 (or TVD <= 0.01) | <= 0.9 | > 0.9 |
| 1-way TVD, synthetic against real (largest column) | <= 0.05 | <= 0.15 | > 0.15 |
| KS distance of numeric columns (largest) | <= 0.1 | <= 0.3 | > 0.3 |

The call is the worst check, and at best "use with care" when there is a warning (values in the
output that are not in the input, a numeric column off, a broken rule, a privacy-smoke flag, more
than ``HANDLED_SHARE`` of the rows outside a column's declared domain, contribution bounding).
Diagnostics of the estimator (a fallback to PrivSyn's consistency step, an estimate whose 1-way
marginal is further from the noisy one than noise explains) judge an internal step, not the output:
they are listed with what to do, and the call, made on the output against the real table, ignores them.
Input values outside the declared domain that were handled as the schema declares (clipped, mapped
to ``other``, ...) are notes, not warnings: a null kept as its own value is part of the domain and is neither.
The box is green for "fit for use", amber for "use with care", red for "not fit", grey when the
report holds no fidelity metrics ("no call").
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from privsyn_spark.evaluate.report_html import at, attr_label, n
from privsyn_spark.evaluate.value_metrics import HIGH_KS

FIT, CARE, NOT_FIT, NO_CALL = "fit for use", "use with care", "not fit", "no call"
_RANK = {FIT: 0, CARE: 1, NOT_FIT: 2}

PAIR_RATIO = (0.5, 0.9)
"""Mean 2-way TVD over the independent baseline's: fit up to the first, use with care up to the second."""
PAIR_NEGLIGIBLE = 0.01
"""A mean 2-way TVD this low is fit whatever the baseline (nearly independent real columns)."""
ONE_WAY_TVD = (0.05, 0.15)
"""Largest 1-way TVD of the synthetic table against the real one."""
KS = (HIGH_KS, 0.3)
"""Largest Kolmogorov-Smirnov distance of a numeric column, synthetic against real values."""
HANDLED_SHARE = 0.05
"""Above this share of the input rows outside a column's domain, the handling is a warning (the
declared domain may not fit the table), not a note."""

_HANDLING = {"other": "mapped to the column's <i>other</i> value", "clip": "clipped to the edge bin",
             "rule": "mapped to the nearest allowed combination", "first bin": "put in the first bin",
             "fail": "under a <i>fail</i> policy (the noisy check decided, see Measured marginals)"}


@dataclass(frozen=True)
class Check:
    """One threshold check: its name, the value (an HTML-tagged number), the thresholds and the outcome."""

    name: str
    value: str
    thresholds: str
    outcome: str
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    """The call, the checks behind it, the warnings, the notes and the estimator's diagnostics (HTML)."""

    call: str
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        """Why the call is not "fit for use" (plain words)."""
        out = [c.reason for c in self.checks if c.outcome != FIT]
        if self.warnings:
            out.append(f"{len(self.warnings)} warning{'s' if len(self.warnings) > 1 else ''} below")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The call as report.json's ``verdict`` (plain text, no numbers of its own: they are the metrics')."""
        return {"call": self.call, "colour": self.colour, "reasons": self.reasons,
                "checks": [{"check": c.name, "value": _plain(c.value), "thresholds": _plain(c.thresholds),
                            "outcome": c.outcome} for c in self.checks],
                "warnings": [_plain(w) for w in self.warnings], "notes": [_plain(x) for x in self.notes],
                "diagnostics": [_plain(x) for x in self.diagnostics]}

    @property
    def colour(self) -> str:
        """The box's colour: green only for "fit for use"; grey when there is nothing to judge by."""
        return {FIT: "green", CARE: "amber", NOT_FIT: "red", NO_CALL: "grey"}[self.call]


def _plain(fragment: str) -> str:
    """An HTML fragment's text."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _grade(value: float, limits: tuple[float, float]) -> str:
    return FIT if value <= limits[0] else CARE if value <= limits[1] else NOT_FIT


def _limits(limits: tuple[float, float], unit: str = "", also: str = "") -> str:
    return f"fit &le; {limits[0]:g}{unit}{also}, care &le; {limits[1]:g}{unit}, else not fit"


def checks(report: Mapping) -> list[Check]:
    """The threshold checks the report has the numbers for (module docstring)."""
    out = []
    pairs, base = at(report, "metrics", "tvd", "tvd_2way_mean")[0], at(report, "metrics", "independent_baseline",
                                                                        "tvd_2way_mean")[0]
    if pairs is not None and base:
        ratio = pairs / base
        outcome = FIT if pairs <= PAIR_NEGLIGIBLE else _grade(ratio, PAIR_RATIO)
        out.append(Check("mean 2-way TVD against independent columns",
                         f"{n(report, 'metrics', 'tvd', 'tvd_2way_mean')} vs "
                         f"{n(report, 'metrics', 'independent_baseline', 'tvd_2way_mean')}: {ratio:.2f}x",
                         _limits(PAIR_RATIO, "x", f" (or TVD &le; {PAIR_NEGLIGIBLE:g})"), outcome,
                         f"the 2-way TVD is {ratio:.2f}x the independent-columns baseline's"))
    one_way = at(report, "metrics", "tvd", "tvd_1way")[0] or {}
    if one_way:
        worst = max(one_way, key=one_way.__getitem__)
        out.append(Check("1-way TVD, synthetic against real (largest column)",
                         f"{n(report, 'metrics', 'tvd', 'tvd_1way', worst)} ({html.escape(attr_label(worst))})",
                         _limits(ONE_WAY_TVD), _grade(one_way[worst], ONE_WAY_TVD),
                         f"the 1-way TVD of {attr_label(worst)} is {one_way[worst]:.3g}"))
    ks = {c: v["ks"] for c, v in (at(report, "metrics", "values")[0] or {}).items()
          if isinstance(v.get("ks"), (int, float))}
    if ks:
        worst = max(ks, key=ks.__getitem__)
        out.append(Check("KS distance of numeric columns (largest)",
                         f"{n(report, 'metrics', 'values', worst, 'ks')} ({html.escape(worst)})",
                         _limits(KS), _grade(ks[worst], KS), f"the KS distance of {worst} is {ks[worst]:.3g}"))
    return out


def _handled(report: Mapping) -> tuple[list[str], list[str]]:
    """(warnings, notes) of the input values handled by a column's declared policy."""
    warned, noted = [], []
    rows = at(report, "metrics", "rows", "real")[0]
    for column, handled in (at(report, "domain_handling")[0] or {}).items():
        rule = column.startswith("__rule_")
        label = f"<b>{html.escape(attr_label(column))}</b>" + (" (rule group)" if rule else "")
        for key, policy_key, what in (("out_of_domain", "handling", "input rows break a declared rule" if rule
                                       else "input values outside the declared domain"),
                                      ("not_a_number", "not_a_number_handling", "input values NaN or not a number")):
            count = handled.get(key)
            if not count:
                continue
            policy = str(handled.get(policy_key))
            text = (f"{label}: {n(report, 'domain_handling', column, key)} {what}, "
                    f"{_HANDLING.get(policy, 'handled by <i>' + html.escape(policy) + '</i>')}")
            if isinstance(rows, int) and rows and count / rows > HANDLED_SHARE:
                warned.append(f"{text}: more than {HANDLED_SHARE:.0%} of the rows (is the declared domain right?).")
            else:
                noted.append(text + ".")
        if handled.get("null_handling") == "fail" and handled.get("nulls"):
            noted.append(f"{label}: {n(report, 'domain_handling', column, 'nulls')} nulls under <i>nulls: fail</i> "
                         "(the noisy check decided, see Measured marginals).")
    return warned, noted


def warnings(report: Mapping) -> list[str]:
    """What an operator should look at: fallbacks, values not in the input, columns off, flags (HTML)."""
    out = []
    for i, item in enumerate(at(report, "metrics", "values_not_in_input")[0] or []):
        out.append(f"Column <b>{html.escape(str(item['column']))}</b>: value {html.escape(str(item['value']))} is in "
                   f"the output ({n(report, 'metrics', 'values_not_in_input', i, 'synthetic_rows')} rows) but "
                   "not in the input.")
    out += _handled(report)[0]
    for column, values in (at(report, "metrics", "values")[0] or {}).items():
        if values.get("high_error"):
            out.append(f"Column <b>{html.escape(column)}</b>: high value-level error, KS distance "
                       f"{n(report, 'metrics', 'values', column, 'ks')}.")
    bounding_warning = at(report, "privacy_unit", "bounding", "warning")[0]
    if bounding_warning:
        out.append("Contribution bounding (NOT private): " + html.escape(str(bounding_warning)) + ".")
    if at(report, "metrics", "rules", "synthetic_violations")[0]:
        out.append("Synthetic rows break a declared rule (see Metrics, Declared rules).")
    if at(report, "metrics", "privacy_smoke", "flag")[0]:
        out.append("Privacy smoke check flagged an excess of synthetic rows equal to real rows.")
    return out


def diagnostics(report: Mapping) -> list[str]:
    """The estimator's diagnostics, each with what to do (HTML): outside the call (module docstring)."""
    out = []
    act = ("Nothing to do while the 1-way TVD check above is fit for use; otherwise compare the column's "
           "histograms below, and give the 1-way marginals more of the budget (<i>budget_split</i>) or the run "
           "a larger epsilon.")
    if at(report, "estimation", "method")[0] == "consistency":
        reason = at(report, "estimation", "info", "fallback_reason")[0]
        out.append("Fallback: targets came from PrivSyn's consistency step, not Private-PGM"
                   + (f" ({html.escape(str(reason))})" if reason else "") + ". Nothing to do while the checks "
                   "above are fit for use; otherwise let Private-PGM run: a larger <i>--model-cells</i>, or fewer "
                   "or coarser columns.")
    for column in at(report, "estimation", "one_way_fit", "off")[0] or []:
        fit = ("estimation", "one_way_fit", "attributes", column)
        out.append(f"Column <b>{html.escape(attr_label(str(column)))}</b>: the estimate's 1-way marginal is TVD "
                   f"{n(report, *fit, 'tvd')} from the noisy one, {n(report, *fit, 'ratio')}x what noise "
                   f"explains ({n(report, *fit, 'noise_tvd')}). " + act)
    return out


def verdict(report: Mapping) -> Verdict:
    """The fit-for-use call of a report (module docstring), with its checks, warnings and notes."""
    found, found_warnings = checks(report), warnings(report)
    call = max((c.outcome for c in found), key=_RANK.__getitem__, default=NO_CALL)
    if found_warnings and call in (FIT, NO_CALL):
        call = CARE
    return Verdict(call, found, found_warnings, _handled(report)[1], diagnostics(report))


def verdict_html(v: Verdict) -> str:
    """The call line, the checks table, the warnings and the notes (inside the verdict box)."""
    because = "" if v.call == FIT or not v.reasons else ": " + html.escape("; ".join(v.reasons))
    head = f'<p class="call"><b>Call: {html.escape(v.call)}</b>{because}.</p>'
    if not v.checks:
        head += "<p>The report holds no fidelity metrics to judge the synthetic table by.</p>"
    else:
        head += ("<table><tr><th>check</th><th>value</th><th>thresholds</th><th>outcome</th></tr>"
                 + "".join(f"<tr><td>{c.name}</td><td>{c.value}</td><td>{c.thresholds}</td><td>{c.outcome}</td></tr>"
                           for c in v.checks) + "</table>")
    parts = [head, '<p><b>Warnings.</b></p><ul class="warn">' + "".join(f"<li>{w}</li>" for w in v.warnings) + "</ul>"
             if v.warnings else "<p><b>Warnings.</b> None.</p>"]
    if v.notes:
        parts.append("<p><b>Notes</b> (input handled as the schema declares, counted):</p><ul>"
                     + "".join(f"<li>{x}</li>" for x in v.notes) + "</ul>")
    if v.diagnostics:
        parts.append("<p><b>Diagnostics</b> (the estimator, not the output: not part of the call):</p><ul>"
                     + "".join(f"<li>{x}</li>" for x in v.diagnostics) + "</ul>")
    return "".join(parts)
