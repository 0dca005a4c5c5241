"""The run report of a people run holds the people metrics of the written rows against the input (NOT
private), equal to a pandas brute force on a small keyed table; --no-evaluate leaves them out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark.cli.pipeline import RunConfig, run
from privsyn_spark.config import SynthOptions
from tests.people_tables import keyed_table, people_doc

pytestmark = pytest.mark.slow
M = 10


def _tvd(real: pd.Series, synthetic: pd.Series) -> float:
    both = pd.concat([real.value_counts(normalize=True), synthetic.value_counts(normalize=True)], axis=1).fillna(0)
    return float(0.5 * np.abs(both.iloc[:, 0] - both.iloc[:, 1]).sum())


def _persons(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per key, as the metrics reduce it: the smallest person columns, rows capped at M, total amount,
    whether every row has one channel."""
    grouped = rows.groupby("customer_id")
    return pd.DataFrame({"segment": grouped.segment.min(), "region": grouped.region.min(),
                         "rows": grouped.size().clip(upper=M), "total": grouped.amount.sum(),
                         "one": grouped.channel.nunique() <= 1})


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    points = np.union1d(a, b)
    cdf = [np.searchsorted(np.sort(x), points, side="right") / len(x) for x in (a, b)]
    return float(np.max(np.abs(cdf[0] - cdf[1])))


def test_the_run_report_holds_the_people_metrics(spark, tmp_path):
    real = keyed_table(60, seed=4)
    real.to_csv(tmp_path / "orders.csv", index=False)
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(people_doc()))
    synth = SynthOptions(str(tmp_path / "schema.yaml"), 8.0, run_id="report", runs_dir=str(tmp_path / "runs"),
                         no_ledger=True)
    config = RunConfig(input=str(tmp_path / "orders.csv"), output=str(tmp_path / "rows"),
                       persons_output=str(tmp_path / "persons"), synth=synth, people=30, seed=2)
    returned = run(spark, config)
    report = json.loads((tmp_path / "runs" / "report" / "operator" / "report.json").read_text())
    assert returned["metrics"] == report["metrics"] and report["run"]["persons_version"] == 0
    metrics = report["metrics"]["people"]
    synthetic = spark.read.format("delta").load(str(tmp_path / "rows")).toPandas()  # a synthetic table
    mine, theirs = _persons(real), _persons(synthetic)
    assert len(theirs) <= 30
    assert metrics["rows_per_person_tvd"] == pytest.approx(_tvd(mine.rows, theirs.rows))
    assert metrics["person_tvd_1way"] == pytest.approx(np.mean([_tvd(mine[c], theirs[c])
                                                                for c in ("segment", "region")]))
    assert metrics["person_tvd_2way"] == pytest.approx(_tvd(mine.segment + "|" + mine.region,
                                                            theirs.segment + "|" + theirs.region))
    assert metrics["one_value_share_real"] == pytest.approx(mine.one.mean())
    assert metrics["one_value_share_synthetic"] == pytest.approx(theirs.one.mean())
    assert metrics["total_amount_ks"] == pytest.approx(_ks(mine.total.to_numpy(), theirs.total.to_numpy()))
    assert 0 < metrics["workload_queries"] and report["run"]["output_version"] == 0
    assert "REALID" not in json.dumps(report)


def test_no_evaluate_leaves_the_metrics_out(spark, tmp_path):
    keyed_table(30, seed=5).to_csv(tmp_path / "orders.csv", index=False)
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(people_doc()))
    synth = SynthOptions(str(tmp_path / "schema.yaml"), 8.0, run_id="quiet", runs_dir=str(tmp_path / "runs"),
                         no_ledger=True)
    config = RunConfig(input=str(tmp_path / "orders.csv"), output=str(tmp_path / "rows"),
                       persons_output=str(tmp_path / "persons"), synth=synth, evaluate=False)
    report = run(spark, config)
    assert not report["metrics"] and (tmp_path / "runs" / "quiet" / "operator" / "report.json").exists()
