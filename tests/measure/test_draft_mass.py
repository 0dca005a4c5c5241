"""Private drafts keep the mass: the drafted bins hold a long-tailed amount and Adult's capital-gain and age
at epsilon 0.1 with no declared bounds, over many draft seeds (the draft's noise, seeded for the test)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.draft_schema import draft_schema_privately
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly

SAMPLE = "privsyn_spark/sample/adult.csv.gz"
#: Columns a draft of the Adult sample shares its rho with (14 kept ones, plus the amount here).
PADDING = 12
DRAFT_SEEDS = 24


def heavy_tailed_amount(rows: int, seed: int = 1) -> np.ndarray:
    """90% zeros, the rest lognormal (a claims or revenue column): whole amounts."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(rows) < 0.9, 0, np.round(np.exp(rng.normal(6.0, 1.0, rows)))).astype(np.int64)


@pytest.fixture(scope="module")
def amounts(spark):
    """The real values (pandas: the test's reference) and one cached Spark table: Adult's age and capital-gain,
    the amount, and constant columns so that each column gets the share of rho it gets in a 15-column draft."""
    adult = pd.read_csv(SAMPLE, usecols=["age", "capital-gain"])
    real = pd.DataFrame({"age": adult["age"], "capital-gain": adult["capital-gain"],
                         "amount": heavy_tailed_amount(len(adult))})
    table = real.assign(**{f"pad{i}": np.zeros(len(real), dtype=np.int64) for i in range(PADDING)})
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
        schema = draft_schema_privately(df, 0.1, 1e-9, sampler=SeededSamplerForTestsOnly(seed)).schema
        for name in real.columns:
            column = schema.column(name)
            assert column.kind == "numerical", (seed, name)
            share = clipped_share(real[name].to_numpy(), column.edges)
            worst[name] = max(worst.get(name, 0.0), share)
            assert share < 0.01, (seed, name, share, column.edges)
        assert schema.column("capital-gain").spikes == (0.0,) and schema.column("amount").spikes == (0.0,)
    assert set(worst) == {"age", "capital-gain", "amount"}
