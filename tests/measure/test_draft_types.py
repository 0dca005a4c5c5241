"""A private draft of a CSV tests whether its string columns hold numbers or dates (noisy counts, charged within the
draft's budget and ledger record); --dtype wins. Exact counts against pandas, the decision over 20 noise seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark.budget.ledger import dataset_state, set_budget
from privsyn_spark.cli import main
from privsyn_spark.measure import draft_counts as counts
from privsyn_spark.measure.encode import spark_type
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.discovery import DraftBudget
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.type_test import TYPE_CANDIDATES, TYPE_TEST_SHARE, release_type

N = 3000
TESTED = {"n": "int", "x": "double", "d": "date", "t": "timestamp", "city": None}


def table() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    day = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 365, N), "D")
    frame = pd.DataFrame({
        "n": rng.integers(0, 100, N).astype(str), "x": np.round(rng.normal(50, 10, N), 2).astype(str),
        "d": day.strftime("%Y-%m-%d"), "t": (day + pd.to_timedelta(rng.integers(0, 86400, N), "s")).strftime(
            "%Y-%m-%d %H:%M:%S"), "city": rng.choice(["Oslo", "Lima", "Pune"], N),
        "code": rng.choice(["007", "012", "300"], N), "amount": rng.integers(0, 1000, N).astype(str)})
    frame.loc[:9, "n"] = "NA"          # a common null token: neither a value nor a miss
    frame.loc[10:14, "n"] = "unknown"  # five that parse as nothing: read as null under int
    return frame


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("types") / "table.csv"
    table().to_csv(path, index=False)
    return str(path)


def test_counts_are_exact_and_twenty_drafts_at_epsilon_1_find_every_type(spark, csv):
    frame = table()
    df = spark.read.csv(csv, header=True)
    exact = counts.type_counts(df, list(TESTED), [(t, spark_type(t)) for t in TYPE_CANDIDATES], ["NA"])
    assert exact["n"][:4].tolist() == [N - 10, 5, 5, 5]
    assert exact["x"][0] == N and exact["x"][3] == 0 and exact["x"][1] == (~frame["x"].str.fullmatch(r"-?\d+")).sum()
    assert exact["d"].tolist()[0] == N and exact["d"][4] == 0 and exact["d"][5] == 0
    assert exact["t"][4] == N and exact["t"][5] == 0  # a timestamp's text holds more than a date
    assert exact["city"].tolist() == [N] * 6
    rho = DraftBudget.from_eps_delta(1.0, 1e-9).rho * TYPE_TEST_SHARE / len(TESTED)  # the draft's share
    for seed in range(20):
        sampler = SeededSamplerForTestsOnly(seed)
        found = {name: release_type(exact[name], rho, accountant=Accountant(rho * len(TESTED)), sampler=sampler,
                                    name=name) for name in TESTED}
        assert found == TESTED


@pytest.mark.slow
def test_the_cli_draft_types_its_columns_charges_them_in_its_ledger_record_and_dtype_wins(spark, csv, tmp_path):
    ledger, out = str(tmp_path / "ledger"), tmp_path / "draft.yaml"
    set_budget(spark, ledger, "typed", 3.0, 1e-9)
    assert main(["infer-schema", "--input", csv, "--out", str(out), "--epsilon", "1", "--ledger", ledger,
                 "--dataset-id", "typed", "--run-id", "d1", "--dtype", "code=string", "--dtype", "amount=double",
                 "--bounds", "t=2024-01-01:2024-12-31", "--bounds", "d=2024-01-01T00:00:00Z:2024-12-31"]) == 0
    doc = yaml.safe_load(out.read_text())
    kinds = {c["name"]: (c["type"], c.get("dtype")) for c in doc["columns"]}
    assert kinds == {"n": ("numerical", "int"), "x": ("numerical", "double"), "d": ("numerical", "date"),
                     "t": ("timestamp", "timestamp"), "city": ("categorical", "string"),
                     "code": ("categorical", "string"), "amount": ("numerical", "double")}
    columns = {c["name"]: c for c in doc["columns"]}  # the tested types' ISO bounds: the declared days
    assert (columns["t"]["start"], columns["t"]["end"]) == ("2024-01-01", "2024-12-31")
    assert (columns["d"]["edges"][0], columns["d"]["edges"][-1]) == (1704067200, 1735689599)
    assert doc["draft"]["outside_range"]["t"]["range"] == ["2024-01-01T00:00:00Z", "2024-12-31T23:59:59Z"]
    rho = DraftBudget.from_eps_delta(1.0, 1e-9).rho
    state = dataset_state(spark, ledger, "typed")
    assert [r.run_id for r in state.reservations] == ["d1"] and state.spent_rho == pytest.approx(rho)
    assert doc["draft"]["spent_rho"] <= rho * (1 + 1e-9)
    assert "column 'n': read as int (a noisy type test of its text; --dtype overrides)" in doc["draft"]["notes"]
    assert not any("'code': read as" in note or "'amount': read as" in note for note in doc["draft"]["notes"])
