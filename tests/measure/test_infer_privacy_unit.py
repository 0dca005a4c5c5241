"""infer-schema with a privacy id: K proposed from a DP quantile of rows per id (charged through the
accountant), the columns drafted on the table bounded to K with sensitivity K, the id dropped, the
draft's privacy_unit and notes for the reviewer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.draft_bounding import BOUND_SHARE
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.schema_draft import draft_schema_privately
from privsyn_spark.schema.columns import SchemaError

pytestmark = pytest.mark.slow


def test_a_private_draft_proposes_k_and_drafts_on_the_bounded_table(spark):
    rng = np.random.default_rng(2)
    sizes = np.minimum(200, rng.zipf(1.7, 3000))
    n = int(sizes.sum())
    frame = pd.DataFrame({"cust": np.repeat(np.arange(3000), sizes), "shop": rng.choice(["a", "b", "c"], n),
                          "amount": rng.integers(1, 500, n)})
    df = spark.createDataFrame(frame)
    draft = draft_schema_privately(df, 4.0, 1e-6, privacy_id=("cust",), sampler=SeededSamplerForTestsOnly(3))
    unit = draft.document["privacy_unit"]
    k = unit["max_rows_per_id"]
    assert unit["id"] == ["cust"] and 1 <= k <= 200
    exact_q = int(np.quantile(sizes, 0.9, method="higher"))
    assert exact_q / 2 <= k <= 2 * exact_q  # the grid's cell of the 0.9 quantile, at a generous budget
    assert {"name": "cust", "type": "drop"} in draft.document["columns"]
    first, *rest = draft.ledger
    assert first["name"] == "infer:rows_per_id" and first["sensitivity"] == 1.0
    assert first["rho"] == pytest.approx(BOUND_SHARE * draft.rho)
    assert rest and all(e["sensitivity"] == k and e["max_rows_per_id"] == k for e in rest)
    assert sum(e["rho"] for e in draft.ledger) == pytest.approx(draft.rho)
    assert any("quantile of rows per id" in note for note in draft.notes)
    assert draft.schema.privacy_unit.bound == k
    given = draft_schema_privately(df, 4.0, 1e-6, privacy_id=("cust",), max_rows_per_id=3,
                                   sampler=SeededSamplerForTestsOnly(3))
    assert given.document["privacy_unit"]["max_rows_per_id"] == 3 and given.ledger[0]["sensitivity"] == 3
    with pytest.raises(SchemaError.__mro__[1], match="not in the input table"):
        draft_schema_privately(df, 4.0, 1e-6, privacy_id=("customer",), sampler=SeededSamplerForTestsOnly(3))


def test_a_private_draft_bounds_once_and_every_count_reads_the_same_kept_rows(spark, monkeypatch):
    """Bounding's keys are random: a draft that re-ran it in each Spark job would count another subset of
    rows in each. Every count the draft makes (categories, numeric grids, whole numbers) gets the one
    bounded table, cached, and the kept rows hash alike in every call."""
    from pyspark.sql import functions as F

    from privsyn_spark.measure import draft_counts as discovery

    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 40, 400)
    n = int(sizes.sum())
    frame = pd.DataFrame({"cust": np.repeat(np.arange(400), sizes), "shop": rng.choice(["a", "b", "c"], n),
                          "amount": rng.integers(1, 500, n)})
    df = spark.createDataFrame(frame).repartition(3)
    seen = []

    def watched(name):
        real = getattr(discovery, name)

        def call(table, *args, **kwargs):
            cached = table._jdf.queryExecution().withCachedData().toString().lstrip().startswith("InMemoryRelation")
            digest = table.agg(F.sum(F.xxhash64(*table.columns) % 1_000_003)).first()[0]
            seen.append((name, cached, digest, table.count()))
            return real(table, *args, **kwargs)
        monkeypatch.setattr(discovery, name, call)

    for name in ("category_counts", "grid_counts"):
        watched(name)
    draft_schema_privately(df, 4.0, 1e-6, privacy_id=("cust",), max_rows_per_id=3,
                           sampler=SeededSamplerForTestsOnly(3))
    assert {s[0] for s in seen} == {"category_counts", "grid_counts"}
    assert all(cached for _, cached, _, _ in seen), seen
    assert len({(digest, rows) for _, _, digest, rows in seen}) == 1, seen
    assert seen[0][3] == int(np.minimum(sizes, 3).sum())


def test_budget_show_lists_a_spent_draft_as_committed_with_the_k_it_chose(spark, tmp_path, capsys):
    from privsyn_spark.budget.ledger import dataset_state, set_budget
    from privsyn_spark.cli import main
    from privsyn_spark.privacy.noise import seeded_noise_for_tests_only

    rng = np.random.default_rng(4)
    sizes = np.minimum(40, rng.zipf(1.7, 800))
    frame = pd.DataFrame({"cust": np.repeat(np.arange(800), sizes), "shop": rng.choice(["a", "b"], int(sizes.sum()))})
    table, ledger = str(tmp_path / "people"), str(tmp_path / "ledger")
    spark.createDataFrame(frame).write.parquet(table)
    set_budget(spark, ledger, "people", 6.0, 1e-6, privacy_unit="cust")
    out = tmp_path / "draft.yaml"
    with seeded_noise_for_tests_only(4):  # the ledger's record is checked, not the noise: one fixed draw
        assert main(["infer-schema", "--input", table, "--out", str(out), "--epsilon", "4", "--ledger", ledger,
                     "--dataset-id", "people", "--run-id", "d1", "--privacy-id", "cust", "--master", "local[2]"]) == 0
    import yaml

    k = yaml.safe_load(out.read_text())["privacy_unit"]["max_rows_per_id"]
    (held,) = dataset_state(spark, ledger, "people").reservations
    assert held.status == "committed" and held.drawn and held.max_rows_per_id == k
    capsys.readouterr()
    assert main(["budget", "show", "--ledger", ledger, "--dataset-id", "people"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "run 'd1'" in x]
    assert f"max_rows_per_id={k} committed" in line and "no noise drawn" not in line and "uncommitted" not in line
