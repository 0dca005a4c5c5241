"""Is a table big enough for its budget: judged from the noisy total, with its noise sd."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from privsyn_spark.errors import BadInputData
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.table_size import check_table_size, default_rows, table_size_warnings, total_noise_sd
from privsyn_spark.release.measure_privately import measure_privately

SIZES = [4, 5, 3, 6]


def measure(table, seed: int, rho: float):
    return measure_privately(table.one_way(), table.indif(), table.count_marginals, table.domain, run_id="t",
                             schema_hash="h", rho=rho, sampler=SeededSamplerForTestsOnly(seed))


@pytest.fixture(autouse=True)
def quiet_sampler():
    logging.getLogger("privsyn_spark.privacy.noise").setLevel(logging.ERROR)


def test_noise_sd_of_the_noisy_total_matches_its_spread(table_factory):
    table = table_factory(2000, SIZES, seed=1)
    draws = [measure(table, seed, rho=0.002) for seed in range(400)]
    totals = np.array([m.noisy_total for m in draws])
    sd = np.mean([total_noise_sd(m) for m in draws])  # varies a little with the selected marginals
    assert np.std(totals, ddof=1) == pytest.approx(sd, rel=0.15)
    assert abs(totals.mean() - 2000) < 4 * sd / np.sqrt(len(totals))


def test_an_empty_table_stops_and_a_real_one_passes(table_factory):
    empty, full = table_factory(0, SIZES), table_factory(2000, SIZES, seed=2)
    stopped = 0
    for seed in range(200):
        try:
            check_table_size(measure(empty, seed, rho=0.01))
        except BadInputData as err:
            assert "empty or too small for this budget" in str(err)
            stopped += 1
        check_table_size(measure(full, seed, rho=0.01))  # never raises
    assert stopped >= 0.97 * 200  # a noisy total of an empty table is above 3 sd w.p. ~0.13%


def test_default_rows_are_the_low_end_of_the_interval_and_weak_budgets_warn(table_factory):
    table = table_factory(2000, SIZES, seed=3)
    strong = measure(table, 0, rho=1.0)
    assert table_size_warnings(strong) == []
    assert default_rows(strong) == max(1, round(strong.noisy_total - 2 * total_noise_sd(strong)))
    assert abs(default_rows(strong) - 2000) < 30
    weak = measure(table, 0, rho=1e-5)  # 1-way noise sd ~ 400 per cell on 2,000 rows
    warnings = table_size_warnings(weak)
    assert len(warnings) == 1 and "will mostly reflect noise" in warnings[0]
