"""The verdict's call, colour, warnings and notes from hand-made report dicts (no Spark), and the
domain tallies of a real counting pass over a small table with kept nulls and real out-of-domain values."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
import pytest

from privsyn_spark.evaluate.report import render_html, write_report
from privsyn_spark.evaluate.report_html import format_number
from privsyn_spark.evaluate.verdict import CARE, FIT, NO_CALL, NOT_FIT, verdict
from privsyn_spark.measure.encode import encode, with_rule_codes
from privsyn_spark.measure.engine import check_domain_policies, count_marginals, one_and_two_way
from privsyn_spark.schema.schema import parse_schema

from .report_check import check_report


def good_report() -> dict:
    """A report whose every check is well inside "fit for use", no warnings."""
    return {
        "run": {"run_id": "r", "dataset": "d"},
        "budget": {"epsilon": 1.0, "delta": 1e-9, "rho": 0.015, "spent_rho": 0.015, "dataset_ledger": None},
        "selection": {"selected_pairs": [["age", "income"], ["__rule_relationship__gender", "income"]],
                      "noisy_total": 48872.29232927152, "noisy_total_sd": 3.2},
        "estimation": {"method": "pgm", "one_way_fit": {"attributes": {"age": {"tvd": 0.004, "noise_tvd": 0.004,
                                                                               "ratio": 1.0}}, "off": []}},
        "domain_handling": {"workclass": {"nulls": 2799, "null_handling": "value"},
                            "occupation": {"nulls": 2809, "null_handling": "value"}},
        "metrics": {"rows": {"real": 1000, "synthetic": 1000},
                    "tvd": {"tvd_1way": {"age": 0.01, "income": 0.002}, "tvd_2way_mean": 0.02},
                    "independent_baseline": {"tvd_2way_mean": 0.08},
                    "values": {"age": {"ks": 0.02, "high_error": False}},
                    "privacy_smoke": {"flag": False}},
    }


def page_of(report: dict) -> tuple[str, str]:
    """The rendered page and its text (tags removed, entities decoded)."""
    page = render_html(json.loads(json.dumps(report)))
    return page, html.unescape(re.sub(r"<[^>]+>", "", page))


def box(page: str) -> str:
    return re.search(r'<div class="verdict ([^"]+)" data-call="([^"]+)"', page).group(0)


def test_green_only_when_nothing_is_wrong():
    report = good_report()
    assert verdict(report).call == FIT and verdict(report).warnings == [] and verdict(report).notes == []
    page, text = page_of(report)
    assert 'class="verdict verdict-green" data-call="fit for use"' in box(page)
    assert "Call: fit for use." in text and "Warnings. None." in text
    # the thresholds are stated on the page
    assert "0.02 vs 0.08: 0.25x" in text and "fit ≤ 0.5x (or TVD ≤ 0.01), care ≤ 0.9x, else not fit" in text
    assert "fit ≤ 0.1, care ≤ 0.3, else not fit" in text  # KS


@pytest.mark.parametrize(("change", "call", "colour", "reason"), [
    (lambda r: r["metrics"]["values"]["age"].update(ks=0.2), CARE, "amber", "the KS distance of age is 0.2"),
    (lambda r: r["metrics"]["values"]["age"].update(ks=0.45), NOT_FIT, "red", "the KS distance of age is 0.45"),
    (lambda r: r["metrics"]["tvd"].update(tvd_2way_mean=0.06), CARE, "amber",
     "the 2-way TVD is 0.75x the independent-columns baseline's"),
    (lambda r: r["metrics"]["tvd"].update(tvd_2way_mean=0.079), NOT_FIT, "red", "0.99x"),
    (lambda r: r["metrics"]["tvd"]["tvd_1way"].update(income=0.1), CARE, "amber", "the 1-way TVD of income is 0.1"),
    (lambda r: r["metrics"]["privacy_smoke"].update(flag=True), CARE, "amber", "1 warning below"),
])
def test_the_call_follows_the_thresholds(change, call, colour, reason):
    report = good_report()
    change(report)
    assert verdict(report).call == call
    page, text = page_of(report)
    assert f'verdict-{colour}" data-call="{call}"' in box(page)
    assert f"Call: {call}: " in text and reason in text


def test_estimator_diagnostics_stay_out_of_the_call_and_say_what_to_do(tmp_path):
    report = good_report()  # every output-vs-real check fit for use
    report["estimation"] = {"method": "consistency", "info": {"fallback_reason": "junction tree too large"},
                            "one_way_fit": {"attributes": {"age": {"tvd": 0.04, "noise_tvd": 0.003, "ratio": 13.3}},
                                            "off": ["age"]}}
    found = verdict(report)
    assert found.call == FIT and found.warnings == [] and len(found.diagnostics) == 2
    page, text = page_of(report)
    assert 'verdict-green" data-call="fit for use"' in box(page)
    assert "Diagnostics (the estimator, not the output: not part of the call)" in text
    assert "Fallback: targets came from PrivSyn's consistency step" in text and "--model-cells" in text
    assert "age: the estimate's 1-way marginal is TVD 0.04 from the noisy one, 13.3x what noise explains" in text
    assert "Nothing to do while the 1-way TVD check above is fit for use" in text
    json_path, _ = write_report(report, tmp_path)
    doc = json.loads(json_path.read_text())["verdict"]
    assert doc["call"] == FIT and doc["colour"] == "green" and len(doc["diagnostics"]) == 2


def test_report_json_carries_the_call(tmp_path):
    report = good_report()
    report["metrics"]["values"]["age"]["ks"] = 0.2
    report["domain_handling"]["age"] = {"out_of_domain": 3, "handling": "clip"}
    json_path, html_path = write_report(report, tmp_path)
    check_report(json_path, html_path, min_images=0)  # the verdict adds no number of its own
    doc = json.loads(json_path.read_text())["verdict"]
    assert doc["call"] == CARE and doc["colour"] == "amber" and doc["reasons"] == ["the KS distance of age is 0.2"]
    assert doc["warnings"] == [] and doc["notes"] == ["age: 3 input values outside the declared domain, clipped to "
                                                      "the edge bin."]
    assert doc["checks"][-1] == {"check": "KS distance of numeric columns (largest)", "value": "0.2 (age)",
                                 "thresholds": "fit ≤ 0.1, care ≤ 0.3, else not fit", "outcome": CARE}
    assert html_path.read_text().count('id="verdict"') == 1  # not shown twice


def test_a_tiny_2way_tvd_is_fit_whatever_the_baseline():
    report = good_report()
    report["metrics"]["tvd"]["tvd_2way_mean"] = 0.008
    report["metrics"]["independent_baseline"]["tvd_2way_mean"] = 0.009  # nearly independent real columns
    assert verdict(report).call == FIT


def test_no_metrics_no_call():
    report = good_report()
    del report["metrics"], report["estimation"]
    page, text = page_of(report)
    assert verdict(report).call == NO_CALL and 'verdict-grey" data-call="no call"' in box(page)
    assert "Call: no call." in text and "holds no fidelity metrics" in text


def test_kept_nulls_are_not_out_of_domain_handled_values_are_notes():
    report = good_report()
    report["domain_handling"].update({
        "age": {"out_of_domain": 3, "handling": "clip"},  # 0.3 % of 1,000 rows: a note
        "__rule_relationship__gender": {"out_of_domain": 4, "handling": "rule"},
        "hours": {"not_a_number": 2, "not_a_number_handling": "first bin"},
        "native-country": {"out_of_domain": 80, "handling": "other", "nulls": 5, "null_handling": "value"},
    })
    v = verdict(report)
    page, text = page_of(report)
    assert "workclass" not in text.split("Notes")[1].split("Budget.")[0]  # its kept nulls: neither note nor warning
    assert "age: 3 input values outside the declared domain, clipped to the edge bin." in text
    assert ("relationship + gender (rule group): 4 input rows break a declared rule, mapped to the nearest "
            "allowed combination.") in text
    assert "hours: 2 input values NaN or not a number, put in the first bin." in text
    assert len(v.notes) == 3
    # 8 % of the rows outside a declared domain: the domain may be wrong, a warning
    assert len(v.warnings) == 1 and v.call == CARE
    assert ("native-country: 80 input values outside the declared domain, mapped to the column's other value: more "
            "than 5% of the rows") in text
    assert "None" not in text.split("Verdict")[2].split("Budget.")[0]  # no "handled by None"


def test_pairs_are_rows_and_totals_integers(tmp_path):
    json_path, html_path = write_report(good_report(), tmp_path)
    check_report(json_path, html_path, min_images=0)  # every number still equals report.json's
    page = html_path.read_text()
    assert "<tr><td>1</td><td>age &times; income</td></tr>" in page
    assert "<tr><td>2</td><td>relationship + gender &times; income</td></tr>" in page
    assert format_number(48872.29232927152) == "48,872" and ">48,872</span>" in page
    assert "e+0" not in re.sub(r'data-value="[^"]*"', "", page)
    assert format_number(22.4) == "22.4" and format_number(1e-9) == "1e-09" and format_number(-1500.7) == "-1,501"


def test_ledger_in_rho_and_epsilon():
    report = good_report()
    report["budget"]["dataset_ledger"] = {"ledger": "l", "dataset_id": "adult", "spent_rho": 0.015,
                                          "budget_rho": 0.045, "left_rho": 0.03, "spent_epsilon": 1.0,
                                          "budget_epsilon": 3.0, "left_epsilon": 2.1, "budget_delta": 1e-9}
    _, text = page_of(report)
    assert ("After this run the dataset adult has spent rho 0.015 (epsilon 1 at delta 1e-09) in total over all runs "
            "and drafts; rho 0.03 of 0.045 is left (epsilon 2.1 of 3 at delta 1e-09).") in text
    del report["budget"]
    _, text = page_of(report)
    assert "No budget ledger was used" not in text and "Ledger. Not shown: this page was made without the model" in text


SCHEMA = parse_schema({"columns": [
    {"name": "cat", "type": "categorical", "values": ["a", "b"]},  # nulls kept as a value (the default)
    {"name": "num", "type": "numerical", "dtype": "double", "min": 0, "max": 10, "bins": 2},
    {"name": "rel", "type": "categorical", "values": ["Husband", "Wife"], "nulls": "none"},
    {"name": "sex", "type": "categorical", "values": ["Male", "Female"]},
], "rules": [{"type": "implies", "if": {"rel": "Husband"}, "then": {"sex": "Male"}}]})


@pytest.mark.parametrize("backend", ["jvm", "arrow"])
def test_domain_tallies_of_a_real_pass(spark, backend):
    """Kept nulls are counted as a value, never as out of domain; real out-of-domain values are."""
    frame = pd.DataFrame({
        "cat": ["a", None, None, "b", "zz", "a", None, "b"],       # 3 kept nulls, 1 unseen ('zz')
        "num": [1.0, None, 12.0, 3.0, 4.0, -1.0, 5.0, 9.0],       # 1 kept null, 2 outside [0, 10]
        "rel": ["Husband", "Wife", None, "Wife", "Husband", "Wife", "Wife", "Husband"],  # nulls: none -> 1 outside
        "sex": ["Male", "Female", "Male", "Female", "Female", "Female", "Female", "Male"],  # 1 husband is female
    }).astype(object)
    df = spark.createDataFrame(frame.where(frame.notna(), None), "cat string, num double, rel string, sex string")
    encoded = with_rule_codes(encode(df, SCHEMA))
    counts = count_marginals(encoded, one_and_two_way(encoded.domain), backend=backend)
    handling = check_domain_policies(encoded, counts)
    rule = next(c.name for c in encoded.extra)
    # brute force: the same tallies from the pandas frame
    cat, num, rel = frame["cat"], frame["num"].astype(float), frame["rel"]
    assert handling == {
        "cat": {"out_of_domain": int((cat.notna() & ~cat.isin(["a", "b"])).sum()), "handling": "other",
                "nulls": int(cat.isna().sum()), "null_handling": "value"},
        "num": {"out_of_domain": int(((num < 0) | (num > 10)).sum()), "handling": "clip",
                "clipped_share": float(((num < 0) | (num > 10)).mean()), "nulls": int(num.isna().sum()),
                "null_handling": "value"},
        "rel": {"out_of_domain": int((~rel.isin(["Husband", "Wife"])).sum()), "handling": "other"},  # its null
        rule: {"out_of_domain": int(((rel == "Husband") & (frame["sex"] != "Male")).sum()), "handling": "rule"},
    }
    assert handling["cat"]["nulls"] == 3 and handling["num"]["out_of_domain"] == 2
    report = good_report()
    report["domain_handling"] = handling
    report["metrics"]["rows"]["real"] = 80  # keep every tally below the warning share
    v = verdict(report)
    _, text = page_of(report)
    assert v.warnings == [] and len(v.notes) == 4, v.notes
    assert "cat: 1 input values outside the declared domain, mapped to the column's other value." in text
    assert "num: 2 input values outside the declared domain, clipped to the edge bin." in text
    assert "rel: 1 input values outside the declared domain, mapped to the column's other value." in text
    assert "rel + sex (rule group): 1 input rows break a declared rule" in text
    assert "nulls" not in " ".join(v.notes)  # kept nulls are no note
