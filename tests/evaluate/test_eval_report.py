"""The report renders from a hand-made report dict (no Spark): files, valid HTML, images, numbers."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np

from privsyn_spark.evaluate import report as report_module
from privsyn_spark.evaluate.report import write_report
from privsyn_spark.evaluate.report_html import format_number
from privsyn_spark.jsonable import to_jsonable

from .report_check import check_report


def sample_report() -> dict:
    attrs = ["age", "sex", "in/come"]
    matrix = np.array([[np.nan, 0.1, 0.2], [0.1, np.nan, 0.05], [0.2, 0.05, np.nan]])
    return {
        "run": {"run_id": "run-1", "dataset": "adult", "input": "/data/in", "output": "/data/out",
                "started": "2024-01-01T00:00:00", "finished": "2024-01-01T00:05:00", "version": "0.1.0"},
        "budget": {"epsilon": 1.0, "delta": 1e-9, "rho": np.float64(0.0123),
                   "ledger": [{"name": f"one_way:{a}", "rho": 0.001, "sensitivity": 1.0, "sigma": 22.4}
                              for a in attrs]
                   + [{"name": "indif", "rho": 0.002, "sensitivity": 3.5, "sigma": 50.0, "cells": 3},
                      {"name": "marginal:age,sex", "rho": 0.0073, "sensitivity": 1.0, "sigma": 8.2}]},
        "selection": {"marginals": [{"attrs": ("age", "sex"), "rho": 0.0073, "sigma": 8.2, "cells": np.int64(30)}]},
        "estimation": {"method": "pgm", "info": {"iterations": 300, "loss": 1.5e3}},
        "synthesis": {"rows": 48842, "shards": 2,
                      "rounds": [{"round": i, "l1_error": 0.5 / (i + 1)} for i in range(5)]},
        "domain_handling": {"age": {"out_of_domain": 3, "handling": "clip"}},
        "timings": {"measure": 1.25, "estimate": 10.5, "synthesize": 3.0},
        "metrics": {
            "notice": "...", "rows": {"real": 100, "synthetic": 90},
            "tvd": {"tvd_1way_mean": np.float64(0.01), "tvd_1way": {a: 0.01 for a in attrs},
                    "tvd_2way_mean": 0.1167, "worst_pairs": [{"attrs": ["age", "in/come"], "tvd": 0.2}]},
            "range_queries": {"queries": 1000, "triples": 1, "capped": False, "note": "",
                              "mean_abs_error": 0.004, "max_abs_error": float("nan")},
            "ml_efficacy": None,
            "privacy_smoke": {"synthetic_match_share": 0.3, "holdout_match_share": 0.2, "excess": 0.1,
                              "tolerance": 0.05, "flag": True},
            "distributions": {a: {"labels": ["a", "b", "(null)"], "real": [0.5, 0.3, 0.2],
                                  "synthetic": [0.4, 0.4, 0.2]} for a in attrs},
            "tvd_2way_matrix": {"attrs": attrs, "values": matrix},
        },
    }


def test_to_jsonable_and_format():
    doc = to_jsonable({"a": np.float32(0.5), "b": (1, np.int64(2)), "c": float("inf"), "d": np.arange(2)})
    assert doc == {"a": 0.5, "b": [1, 2], "c": None, "d": [0, 1]}
    assert json.dumps(doc)
    assert format_number(48842) == "48,842" and format_number(0.012345) == "0.01235"


def test_report_renders_and_numbers_match(tmp_path):
    json_path, html_path = write_report(sample_report(), tmp_path / "out")
    assert json_path.name == "report.json" and html_path.name == "report.html"
    # 3 histograms, the heat map, GUM rounds, the budget split
    report, parser = check_report(json_path, html_path, min_images=6)
    assert len(parser.images) == 6
    assert report["metrics"]["range_queries"]["max_abs_error"] is None  # NaN -> null
    assert report["metrics"]["tvd_2way_matrix"]["values"][0][0] is None
    assert report["selection"]["marginals"][0]["attrs"] == ["age", "sex"]
    keys = {n["key"] for n in parser.numbers}
    assert "/metrics/tvd/worst_pairs/0/tvd" in keys and "/budget/ledger/4/rho" in keys
    assert "/metrics/tvd/tvd_1way/in~1come" in keys  # JSON pointer escaping


def operator_report() -> dict:
    report = sample_report()
    report["budget"]["spent_rho"] = 0.0123
    report["budget"]["dataset_ledger"] = {"ledger": "/l", "dataset_id": "adult", "spent_rho": 0.02,
                                          "budget_rho": 0.05, "left_rho": 0.03}
    report["estimation"] = {"method": "consistency", "info": {"fallback_reason": "junction tree too large"},
                            "one_way_fit": {"mean_tvd": 0.02, "mean_noise_tvd": 0.004, "worst": ["sex"],
                                            "off": ["sex"], "attributes": {"sex": {"tvd": 0.04, "noise_tvd": 0.003,
                                                                                   "ratio": 13.3}}}}
    report["metrics"]["independent_baseline"] = {"tvd_2way_mean": 0.2334, "method": "product"}
    report["metrics"]["values_not_in_input"] = [{"column": "sex", "value": "(null)", "synthetic_rows": 14}]
    edges = list(np.linspace(0, 100, 41))
    report["metrics"]["values"] = {
        "age": {"ks": 0.25, "high_error": True, "rows": {"real": 100, "synthetic": 90},
                "spikes": [{"value": 40.0, "declared": True, "real": 0.467, "synthetic": 0.056}],
                "histogram": {"edges": edges, "log_x": False, "real": [3] * 40, "synthetic": [2] * 40}},
        "gain": {"ks": 0.01, "high_error": False, "rows": {"real": 100, "synthetic": 90},
                 "spikes": [{"value": 0.0, "declared": True, "real": 0.917, "synthetic": 0.92}],
                 "histogram": {"edges": list(np.geomspace(1, 1e5, 41) - 1), "log_x": True,
                               "real": [90] + [1] * 39, "synthetic": [88] + [1] * 39}}}
    return report


def test_report_opens_with_a_verdict_and_warnings(tmp_path):
    json_path, html_path = write_report(operator_report(), tmp_path / "out")
    # the 6 plots of before and one value plot per numeric column
    report, parser = check_report(json_path, html_path, min_images=8)
    assert len(parser.images) == 8
    page = html_path.read_text()
    assert page.index('id="verdict"') < page.index('id="summary"') < page.index('id="budget"')
    text = re.sub(r"<[^>]+>", "", page)  # the page's text
    assert "Fallback: targets came from PrivSyn's consistency step" in text
    assert "value (null) is in the output" in text and "14 rows" in text
    assert "3 input values outside the declared domain, clipped to the edge bin" in text  # a note: 3 % of rows
    assert "high value-level error, KS distance 0.25" in text
    assert "rho 0.03 of 0.05 is left" in text
    assert "sex: the estimate's 1-way marginal is TVD 0.04 from the noisy one" in text
    assert "0.1167 vs 0.2334: 0.50x" in text
    # the estimate's 1-way fit of sex, 13.3x the noise, is a diagnostic: the call follows the KS distance (care)
    assert 'class="verdict verdict-amber" data-call="use with care"' in page
    assert "Call: use with care: the KS distance of age is 0.25" in html.unescape(text)
    assert "1.25 s" in text  # timings carry their unit
    keys = {n["key"] for n in parser.numbers}
    assert {"/metrics/values/age/ks", "/metrics/values/gain/spikes/0/synthetic", "/selection/marginals/0/sigma",
            "/budget/dataset_ledger/left_rho"} <= keys
    toc = [href for href in ("#verdict", "#summary", "#budget", "#metrics", "#timings")]
    assert all(f'href="{h}"' in page for h in toc)


def test_report_without_warnings_says_none(tmp_path):
    report = sample_report()
    report["domain_handling"] = {}
    report["metrics"]["privacy_smoke"]["flag"] = False
    json_path, html_path = write_report(report, tmp_path / "out")
    _, parser = check_report(json_path, html_path, min_images=6)
    assert "Warnings. None." in re.sub(r"<[^>]+>", "", html_path.read_text())


def test_the_lower_half_is_per_column_rows_collapsed(tmp_path):
    json_path, html_path = write_report(operator_report(), tmp_path / "out")
    check_report(json_path, html_path, min_images=8)  # every number still shown, each once in its place
    page = html_path.read_text()
    assert page.index('id="summary"') < page.index('<h2 id="columns">') < page.index('<h2 id="budget">')
    block = re.search(r'<h2 id="columns">Per column</h2>\s*<details><summary>4 columns: (.*?)</summary>(.*?)</details>',
                      page, re.S)
    assert block, "the per-column table is not one collapsed block"
    rows = dict(re.findall(r"<tr><th>([^<]+)</th>(.*?)</tr>", block.group(2), re.S))
    assert list(rows) == ["column", "age", "sex", "in/come", "gain"]  # the header, then a row per column
    age, sex = rows["age"], rows["sex"]
    assert 'data-key="/metrics/tvd/tvd_1way/age"' in age and 'data-key="/metrics/values/age/ks"' in age
    assert 'class="flag">high' in age and 'data-key="/metrics/values/age/spikes/0/real"' in age
    assert 'data-key="/domain_handling/age/out_of_domain"' in age and "handling: clip" in age
    assert 'data-key="/estimation/one_way_fit/attributes/sex/noise_tvd"' in sex
    lower = page[page.index('<h2 id="columns">'):]  # below the verdict and summary
    for key in ("/metrics/tvd/tvd_1way/age", "/domain_handling/age/out_of_domain",
                "/estimation/one_way_fit/attributes/sex/tvd"):
        assert lower.count(f'data-key="{key}"') == 1  # not again in a nested dump of report.json
    assert 'id="domain_handling"' not in page  # all of it is per column
    metrics = page[page.index('<h2 id="metrics">'):]
    blocks = re.findall(r"<details><summary>([^<]+)</summary>", metrics)
    assert {"tvd", "range queries", "privacy smoke", "Value histograms of numeric columns"} <= set(blocks)
    assert "<img" not in re.sub(r"<details>.*?</details>", "", metrics.split("<h3>2-way TVD</h3>")[0], flags=re.S)


def test_the_page_escapes_a_hostile_column_name(tmp_path):
    hostile = '<script>alert("x")</script>&'
    report = sample_report()
    report["metrics"]["tvd"]["tvd_1way"][hostile] = 0.03
    report["domain_handling"][hostile] = {"out_of_domain": 2, "handling": "<b>drop</b>"}
    json_path, html_path = write_report(report, tmp_path / "out")
    check_report(json_path, html_path, min_images=6)
    page = html_path.read_text()
    assert "<script>" not in page and "<b>drop</b>" not in page
    assert "<th>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;</th>" in page
    assert "handling: &lt;b&gt;drop&lt;/b&gt;" in page
    assert 'data-key="/domain_handling/&lt;script&gt;alert(&#34;x&#34;)&lt;~1script&gt;&amp;/out_of_domain"' in page


def test_the_template_ships_with_the_package():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"evaluate/templates/*.j2"' in pyproject and '"jinja2>=3.1,<4"' in pyproject
    assert (Path(report_module.__file__).parent / "templates" / "report.html.j2").is_file()
