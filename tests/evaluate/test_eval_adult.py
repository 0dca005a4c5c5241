"""evaluation_metrics() end to end on the Adult sample with the real table as 'synthetic', and its report."""

from __future__ import annotations

import pytest

from privsyn_spark.evaluate import evaluation_metrics, write_report
from privsyn_spark.schema.schema import load_schema

from .report_check import check_report

ADULT = "privsyn_spark/sample/adult.csv.gz"
SCHEMA = "privsyn_spark/sample/adult.schema.yaml"


@pytest.fixture(scope="module")
def metrics(spark):
    schema = load_schema(SCHEMA)
    df = spark.read.csv(ADULT, header=True, inferSchema=True)
    return evaluation_metrics(spark, df, df, schema, label="income", seed=0)


@pytest.mark.slow
def test_identical_tables_have_no_error(metrics):
    assert metrics["rows"] == {"real": 48842, "synthetic": 48842}
    assert metrics["tvd"]["tvd_1way_mean"] == metrics["tvd"]["tvd_2way_mean"] == metrics["tvd"]["tvd_2way_max"] == 0.0
    rq = metrics["range_queries"]
    assert rq["queries"] == 1000 and not rq["capped"] and rq["mean_abs_error"] == rq["max_abs_error"] == 0.0
    assert metrics["distributions"]["income"]["labels"] == ["<=50K", ">50K", "(other)", "(null)"]
    assert metrics["distributions"]["age"]["real"] == metrics["distributions"]["age"]["synthetic"]


@pytest.mark.slow
def test_ml_efficacy_well_above_majority(metrics):
    ml = metrics["ml_efficacy"]
    assert ml["majority_class"] == "<=50K" and 0.72 < ml["majority_accuracy"] < 0.8
    assert ml["accuracy_real"] > ml["majority_accuracy"] + 0.06
    assert ml["accuracy_synthetic"] > ml["majority_accuracy"] + 0.06
    assert ml["rows"]["train_real"] + ml["rows"]["test"] == 48842 and ml["rows"]["train_synthetic"] == 48842


@pytest.mark.slow
def test_smoke_on_a_copy_is_near_one_and_flagged(metrics):
    smoke = metrics["privacy_smoke"]
    assert smoke["synthetic_match_share"] == 1.0
    assert 0.8 < smoke["synthetic_match_share_rest"] < 1.0 and smoke["holdout_match_share"] < 0.5 and smoke["flag"]


@pytest.mark.slow
def test_adult_report_renders(metrics, tmp_path):
    report = {"run": {"run_id": "test", "dataset": "adult"}, "metrics": metrics}
    json_path, html_path = write_report(report, tmp_path)
    doc, parser = check_report(json_path, html_path, min_images=16)  # 15 histograms and the heat map
    assert doc["metrics"]["ml_efficacy"]["accuracy_real"] == metrics["ml_efficacy"]["accuracy_real"]
