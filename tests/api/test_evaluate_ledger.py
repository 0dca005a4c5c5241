"""``evaluate(..., model=model).to_html()`` shows the run's budget and the dataset's ledger (rho and epsilon)."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from privsyn_spark import PrivSyn, Schema, evaluate
from privsyn_spark.budget import ledger as L
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta

SCHEMA = {"columns": [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "b", "type": "categorical", "values": ["p", "q"]},
    {"name": "n", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 5},
]}


def numbers(page: str) -> dict[str, float]:
    """data-key -> data-value of every tagged number of the page."""
    return {html.unescape(k): float(v) for k, v in re.findall(r'data-key="([^"]+)" data-value="([^"]+)"', page)}


@pytest.mark.slow
def test_the_page_shows_the_ledger_of_the_model(spark, tmp_path):
    rng = np.random.default_rng(5)
    a = rng.choice(["x", "y", "z"], 3000)
    frame = pd.DataFrame({"a": a, "b": np.where(a == "x", "p", rng.choice(["p", "q"], 3000)),
                          "n": rng.integers(0, 100, 3000).astype("int32")})
    df = spark.createDataFrame(frame)
    ledger, schema = str(tmp_path / "ledger"), Schema.from_dict(SCHEMA)
    L.set_budget(spark, ledger, "toy", epsilon=3.0, delta=1e-9)
    model = PrivSyn(schema, epsilon=1.0, delta=1e-9, ledger=ledger, dataset_id="toy", run_id="ev1",
                    runs_dir=str(tmp_path / "runs")).fit(df)
    out = model.sample(2000, seed=0)
    held = L.dataset_state(spark, ledger, "toy")

    without = evaluate(df, out, schema).to_html()
    assert "No budget ledger was used" not in without and "Not shown: this page was made without the model" in without

    model.save(str(tmp_path / "model"))
    for m in (model, PrivSyn.load(str(tmp_path / "model"))):  # a saved model keeps the ledger state
        report = evaluate(df, out, schema, model=m)
        page = report.to_html(tmp_path / "report.html")
        assert "No budget ledger was used" not in page and "After this run the dataset" in page
        got = numbers(page)
        key = "/budget/dataset_ledger/"
        assert got[key + "spent_rho"] == pytest.approx(held.spent_rho, rel=1e-12)
        assert got[key + "spent_rho"] == pytest.approx(rho_from_eps_delta(1.0, 1e-9), rel=1e-9)  # this one run
        assert got[key + "spent_epsilon"] == pytest.approx(1.0, rel=1e-6)  # one run at the budget's delta
        assert got[key + "budget_epsilon"] == 3.0 and got[key + "budget_delta"] == 1e-9
        assert got[key + "left_rho"] == pytest.approx(held.left_rho, rel=1e-12)
        assert got[key + "left_epsilon"] == pytest.approx(eps_from_rho(held.left_rho, 1e-9), rel=1e-9)
        assert 2.0 < got[key + "left_epsilon"] < 3.0  # zCDP composes rho: more than the naive 3 - 1 is left
        assert got["/budget/epsilon"] == 1.0 and "/metrics/tvd/tvd_2way_mean" in got
        call = report.verdict()
        assert f'data-call="{call["call"]}"' in page and call["call"] in ("fit for use", "use with care", "not fit")
