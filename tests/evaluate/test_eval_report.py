"""The report renders from a hand-made report dict (no Spark): files, valid HTML, images, numbers."""

from __future__ import annotations

import json

import numpy as np

from privsyn_spark.evaluate.report import format_number, to_jsonable, write_report

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
