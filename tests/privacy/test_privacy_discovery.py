"""Private domain discovery mechanisms: accounting, thresholds, grids, spikes, quantile edges (no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_spark.privacy.accounting import Accountant, cdp_delta
from privsyn_spark.privacy.discovery import (
    NUMERIC_SPLIT,
    DraftBudget,
    geometric_grid,
    release_numeric,
    release_outside,
    select_partitions,
    selection_threshold,
)
from privsyn_spark.privacy.draft_range import drafted_edges
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly


def test_budget_split_gives_the_declared_epsilon_delta():
    b = DraftBudget.from_eps_delta(0.1, 1e-9)
    assert b.delta_selection == pytest.approx(5e-10)
    # the zCDP part at the remaining delta is within epsilon; both deltas add up to delta
    assert cdp_delta(b.rho, 0.1) <= 1e-9 - b.delta_selection + 1e-18


def test_selection_threshold_bounds_the_chance_of_a_single_record_value():
    sigma, delta = 3.0, 1e-3
    tau = selection_threshold(sigma, delta)
    # exact discrete Gaussian tail P(Z >= tau - 1) by summation must be <= delta
    z = np.arange(-200, 201)
    p = np.exp(-z ** 2 / (2 * sigma ** 2))
    p /= p.sum()
    assert p[z >= tau - 1].sum() <= delta
    assert tau == pytest.approx(1 + sigma * math.sqrt(2 * math.log(1 / delta)))


def test_partition_selection_keeps_frequent_values_drops_rare_and_registers():
    acc = Accountant(1.0)
    counts = {"big": 5000, "mid": 800, "one": 1, "two": 2}
    out = select_partitions(counts, 0, 0.01, 1e-6, accountant=acc, sampler=SeededSamplerForTestsOnly(1),
                            name="infer:c")
    assert out.values[:2] == ["big", "mid"] and "one" not in out.values and "two" not in out.values
    (entry,) = acc.ledger
    assert entry["name"] == "infer:c" and entry["rho"] == pytest.approx(0.01)
    assert entry["delta"] == 1e-6 and entry["threshold"] == pytest.approx(out.threshold)
    assert entry["sigma"] == pytest.approx(math.sqrt(1 / 0.02))


@pytest.mark.parametrize("lower, upper, integer", [(0, 99999, True), (-37, 1000, True), (17, 90, True),
                                                   (-2.0 ** 31, 2.0 ** 31 - 1, True), (-5.0, 1e6, False)])
def test_grid_covers_the_bounds_without_gaps(lower, upper, integer):
    g = geometric_grid(lower, upper, integer)
    assert np.all(np.diff(g.starts) > 0) and g.starts[0] == lower
    assert np.all(np.diff(g.octave) >= 0) and np.all(np.diff(g.group) >= 0)
    if integer:  # whole-number cells tile [lower, upper] exactly
        assert np.array_equal(g.starts[1:], g.starts[:-1] + g.width[:-1])
        assert g.starts[-1] + g.width[-1] - 1 == upper
    if lower <= 0 <= upper:
        zero = int(np.searchsorted(g.starts, 0.0, side="right") - 1)
        assert g.starts[zero] == 0.0 and g.starts[zero + 1] <= (1.0 if integer else 1e-300)


def _cells(grid, values):
    return np.bincount(np.searchsorted(grid.starts, values, side="right") - 1, minlength=grid.cells)


def _value_counts(values):
    def counts(ranges):
        return np.concatenate([[np.sum(values == v) for v in range(lo, hi + 1)] for lo, hi in ranges])
    return counts


def test_numeric_release_finds_spikes_and_spends_at_most_its_rho():
    rng = np.random.default_rng(0)
    hours = np.concatenate([np.full(20000, 40), np.full(4000, 50), rng.integers(1, 100, 16000)])
    grid = geometric_grid(-2 ** 31, 2 ** 31 - 1, True)
    acc = Accountant(0.01)
    rel = release_numeric(_cells(grid, hours), 0, grid, 0.01, _value_counts(hours), accountant=acc,
                          sampler=SeededSamplerForTestsOnly(3), name="infer:h")
    assert 40.0 in rel.spikes and 50.0 in rel.spikes and len(rel.spikes) == 2
    assert [e["name"] for e in acc.ledger] == ["infer:h:groups", "infer:h:octaves", "infer:h:cells",
                                               "infer:h:values"]
    assert sum(e["rho"] for e in acc.ledger) == pytest.approx(0.01 * sum(NUMERIC_SPLIT[:4]))
    edges = drafted_edges(rel, 8)
    assert all(float(e).is_integer() for e in edges) and 1 <= edges[0] and 99 < edges[-1] <= 255  # a tail octave
    # quantiles of the non-spike part: about 16000 / 8 values per bin, checked at a coarse tolerance
    rest = hours[(hours != 40) & (hours != 50)]
    shares = np.searchsorted(np.sort(rest), np.asarray(edges)) / rest.size
    assert all(np.min(np.abs(shares - q)) < 0.1 for q in np.arange(1, 8) / 8)


def test_numeric_release_with_declared_bounds_uses_them_as_outer_edges():
    ages = np.random.default_rng(1).integers(17, 91, 30000)
    grid = geometric_grid(17, 90, True)
    acc = Accountant(0.01)
    rel = release_numeric(_cells(grid, ages), 0, grid, 0.01, _value_counts(ages), accountant=acc,
                          sampler=SeededSamplerForTestsOnly(4), name="infer:age")
    edges = drafted_edges(rel, 4, 17, 90)
    assert edges[0] == 17 and edges[-1] == 90 and len(edges) >= 5
    assert not rel.spikes


@pytest.mark.parametrize("n", [0, 3])
def test_empty_and_tiny_columns_release_nothing_usable(n):
    values = np.full(n, 7)
    grid = geometric_grid(-2 ** 31, 2 ** 31 - 1, True)
    acc = Accountant(2e-4)
    rel = release_numeric(_cells(grid, values), 0, grid, 1e-4, _value_counts(values), accountant=acc,
                          sampler=SeededSamplerForTestsOnly(5), name="infer:x")
    assert rel.total == 0 and not rel.spikes and drafted_edges(rel, 8) == ()
    assert acc.spent <= 1e-4  # no spike candidate: the value release is not made
    out = select_partitions({"a": n} if n else {}, 0, 1e-4, 1e-9, accountant=acc,
                            sampler=SeededSamplerForTestsOnly(6), name="infer:c")
    assert out.values == []


def test_the_outside_release_counts_the_rows_beyond_the_edges_and_the_clamped_ones():
    values = np.concatenate([np.arange(1, 101), np.full(30, 500), np.full(20, -3)])
    grid = geometric_grid(-2 ** 31, 2 ** 31 - 1, True)
    acc = Accountant(1e7)
    rel = release_numeric(_cells(grid, values), 0, grid, 1e6, _value_counts(values), accountant=acc,
                          sampler=SeededSamplerForTestsOnly(7), name="infer:x")
    # edges [1, 127]: the 30 rows at 500 and the 20 at -3 are outside; 4 more were clamped into the grid
    out = release_outside(_cells(grid, values), 4, (1.0, 127.0), rel, 1e6, accountant=acc,
                          sampler=SeededSamplerForTestsOnly(8), name="infer:x")
    assert out.share == pytest.approx(54 / rel.total) and out.sd < 1e-3
    assert acc.ledger[-1]["name"] == "infer:x:outside" and acc.ledger[-1]["sensitivity"] == 1
