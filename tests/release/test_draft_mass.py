"""Private drafts keep the mass: the drafted bins hold a long-tailed amount and Adult's capital-gain and age
at epsilon 0.1 with no declared bounds, over many draft seeds (the draft's noise, seeded for the test)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.schema_draft import draft_schema_privately
from tests.pipeline.test_pipeline_logs import leaks

SAMPLE = "privsyn_spark/sample/adult.csv.gz"
#: Columns a draft of the Adult sample shares its rho with (14 kept ones, plus the amount here).
PADDING = 12
DRAFT_SEEDS = 20
AMOUNT_ROWS = 200_000


def heavy_tailed_amount(rows: int, seed: int = 1) -> np.ndarray:
    """90% zeros, the rest lognormal (a claims or revenue column): whole amounts."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(rows) < 0.9, 0, np.round(np.exp(rng.normal(6.0, 1.0, rows)))).astype(np.int64)


@pytest.fixture(scope="module")
def amounts(spark):
    """The real values (pandas: the test's reference) and one cached Spark table: the amount (200,000 rows),
    Adult's age and capital-gain (its 48,842 rows, nulls after them), and constant columns so that each column
    gets the share of rho it gets in a 15-column draft."""
    adult = pd.read_csv(SAMPLE, usecols=["age", "capital-gain"])
    amount = heavy_tailed_amount(AMOUNT_ROWS)
    table = pd.DataFrame({"age": pd.array(adult["age"], dtype="Int64"),
                          "capital-gain": pd.array(adult["capital-gain"], dtype="Int64")}).reindex(range(len(amount)))
    table["amount"] = amount
    table = table.assign(**{f"pad{i}": np.zeros(len(table), dtype=np.int64) for i in range(PADDING)})
    real = {"age": adult["age"].to_numpy(), "capital-gain": adult["capital-gain"].to_numpy(), "amount": amount}
    df = spark.createDataFrame(table).cache()
    yield real, df
    df.unpersist()


def clipped_share(values: np.ndarray, edges: tuple[float, ...]) -> float:
    """Share of the rows outside the drafted edges: what a run would clip."""
    return float(np.mean((values < edges[0]) | (values > edges[-1])))


@pytest.mark.slow
def test_drafts_at_epsilon_0_1_hold_the_values_over_many_seeds(amounts):
    real, df = amounts
    worst: dict[str, float] = {}
    for seed in range(DRAFT_SEEDS):
        draft = draft_schema_privately(df, 0.1, 1e-9, sampler=SeededSamplerForTestsOnly(seed))
        schema, header = draft.schema, draft.header()
        for name in real:
            column = schema.column(name)
            assert column.kind == "numerical", (seed, name)
            share = clipped_share(real[name], column.edges)
            worst[name] = max(worst.get(name, 0.0), share)
            assert share < 0.01, (seed, name, share, column.edges)
            # the header's noisy outside share against the truth: within 4 noise sd (and 1 point for the noisy total)
            outside = draft.outside[name]
            assert outside["range"] == [column.edges[0], column.edges[-1]]
            assert abs(outside["noisy_share"] - share) <= 4 * outside["noise_sd"] + 0.01, (seed, name, outside, share)
            assert f"column {name!r}: range [{outside['range'][0]:g}, {outside['range'][1]:g}]; noisy share" in header
        assert schema.column("capital-gain").spikes == (0.0,) and schema.column("amount").spikes == (0.0,)
    assert set(worst) == {"age", "capital-gain", "amount"}


@pytest.mark.slow
def test_a_range_that_clips_is_stated_and_warned_about(amounts, caplog):
    """Declared bounds narrower than the values: the header's noisy share outside them matches the truth and a
    warning says so, with the noisy figure only (never the exact count)."""
    real, df = amounts
    caplog.set_level(logging.WARNING)
    draft = draft_schema_privately(df, 0.1, 1e-9, bounds={"age": (17, 40)}, sampler=SeededSamplerForTestsOnly(5))
    truth = clipped_share(real["age"], (17, 40))
    assert truth > 0.3
    outside = draft.outside["age"]
    assert outside["range"] == [17, 40] and abs(outside["noisy_share"] - truth) <= 4 * outside["noise_sd"] + 0.01
    assert f"{outside['noisy_share']:.1%}" in draft.header() and draft.record()["outside_range"]["age"] == outside
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "outside the drafted" in
                r.getMessage()]
    assert len(warnings) == 1 and "'age'" in warnings[0] and f"{100 * outside['noisy_share']:.1f}%" in warnings[0]
    exact = int(((real["age"] < 17) | (real["age"] > 40)).sum())
    assert leaks("\n".join(r.getMessage() for r in caplog.records), exact) == []


RUN_SEEDS = 3
RUN_ROWS = 48_842


def real_and_synthetic_tail(real: np.ndarray, synthetic: np.ndarray) -> dict[str, tuple[float, float]]:
    """The share of zeros and the 95th/99th percentiles, real and synthetic."""
    return {"zeros": (float(np.mean(real == 0)), float(np.mean(synthetic == 0))),
            **{f"p{q}": (float(np.percentile(real, q)), float(np.percentile(synthetic, q))) for q in (95, 99)}}


@pytest.mark.slow
def test_runs_on_drafted_schemas_keep_the_zeros_and_the_tail(spark, amounts, tmp_path):
    """Three drafts at epsilon 0.1 (no bounds), each reviewed as drafted and run at epsilon 1 on a small table
    (Adult's rows: age, capital-gain and as many amounts): the amounts' share of zeros within 2 points of the
    real one; their and age's 95th and 99th percentiles within 25%."""
    from privsyn_spark.api import PrivSyn
    from privsyn_spark.privacy.noise import seeded_noise_for_tests_only
    from privsyn_spark.schema.schema import parse_schema

    real, df = amounts
    small = {name: values[:RUN_ROWS] for name, values in real.items()}
    table = spark.createDataFrame(pd.DataFrame(small)).cache()
    for seed in range(RUN_SEEDS):
        draft = draft_schema_privately(df, 0.1, 1e-9, sampler=SeededSamplerForTestsOnly(seed))
        doc = {**draft.document, "columns": [c for c in draft.document["columns"] if c["name"] in small]}
        with seeded_noise_for_tests_only(100 + seed):
            model = PrivSyn(parse_schema(doc), epsilon=1.0, delta=1e-9, no_ledger=True, run_id=f"mass-{seed}",
                            runs_dir=str(tmp_path / "runs")).fit(table)
        out = model.sample(RUN_ROWS, seed=seed).toPandas()
        for name in ("capital-gain", "amount"):
            tail = real_and_synthetic_tail(small[name], out[name].to_numpy())
            assert abs(tail["zeros"][0] - tail["zeros"][1]) <= 0.02, (seed, name, tail)
            for q in ("p95", "p99"):
                assert abs(tail[q][1] - tail[q][0]) <= 0.25 * tail[q][0], (seed, name, q, tail)
        tail = real_and_synthetic_tail(small["age"], out["age"].to_numpy())
        assert all(abs(tail[q][1] - tail[q][0]) <= 0.25 * tail[q][0] for q in ("p95", "p99")), (seed, tail)
    table.unpersist()
