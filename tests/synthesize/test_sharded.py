"""GUM sharded over Spark partitions: reconciliation, determinism, and the Spark driver."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.synthesize.gum import GumConfig, marginal_counts
from privsyn_spark.synthesize.sharded import (
    ShardedGumConfig,
    TableLayout,
    deficit_share,
    init_shard,
    make_context,
    round_shard,
    run_shards_locally,
    shard_sizes,
    synthesize_sharded,
)

from .adult_data import MARGINALS, adult_targets
from .test_gum import DENSE


def noisy(targets: dict, sigma: float, seed: int = 123) -> dict:
    """DP-like targets: Gaussian noise per cell, clipped at 0 (inconsistent, like PrivSyn's raw marginals)."""
    rng = np.random.default_rng(seed)
    return {k: np.clip(t + rng.normal(0, sigma, t.shape), 0, None) for k, t in targets.items()}


def test_shard_sizes():
    assert shard_sizes(10, 4) == [4, 3, 3]
    assert shard_sizes(5, 1_000_000) == [5]
    sizes = shard_sizes(10_000_001, 1_000_000)
    assert len(sizes) == 11 and sum(sizes) == 10_000_001 and max(sizes) - min(sizes) <= 1


def test_deficit_shares_sum_to_the_deficit():
    rng = np.random.default_rng(0)
    deficit = np.round(rng.normal(0, 30, 500)) + np.where(rng.random(500) < 0.3, rng.random(500), 0)
    sizes = [700, 1000, 1000, 300]
    u, holder = rng.random(500), rng.integers(0, 4, 500)
    shares = [deficit_share(deficit, sizes, j, u, holder) for j in range(4)]
    assert np.allclose(sum(shares), deficit)
    whole = [s - np.where(holder == j, deficit - np.trunc(deficit), 0) for j, s in enumerate(shares)]
    assert all(np.array_equal(w, np.round(w)) for w in whole)  # integer parts...
    for j, w in enumerate(whole):  # ...proportional to shard size, same sign as the deficit
        assert np.all(np.abs(w - np.trunc(deficit) * sizes[j] / 3000) < 1)
        assert np.all(w * deficit >= 0)


def test_table_layout_round_trip():
    domain, records, targets = adult_targets(MARGINALS)
    layout = TableLayout(domain, list(targets))
    flat = layout.count(records)
    assert flat.size == sum(t.size for t in targets.values())
    for k, t in layout.unpack(flat).items():
        assert np.array_equal(t, targets[k])
    assert np.array_equal(layout.pack(layout.unpack(flat), np.int64), flat)


def test_shard_steps_are_pure_functions_of_seed_shard_and_round():
    """What makes a recomputed task (lost executor) produce the same shard state."""
    domain, _, targets = adult_targets(DENSE)
    cfg = ShardedGumConfig(shard_size=2_500, iterations_per_round=3)
    ctx = make_context(domain, targets, 10_000, 5, cfg)
    records, counts = init_shard(ctx, 2)
    again, counts_again = init_shard(ctx, 2)
    assert np.array_equal(records, again) and np.array_equal(counts, counts_again)
    assert not np.array_equal(records, init_shard(ctx, 1)[0])
    deficit = ctx.targets - 4 * counts
    a = round_shard(ctx, 2, 1, records.copy(), counts.astype(float), deficit)
    b = round_shard(ctx, 2, 1, records.copy(), counts.astype(float), deficit)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(a[1], ctx.layout.count(a[0]))


@pytest.mark.slow
def test_four_shards_reach_the_single_shard_error():
    """On DP-like noisy targets, 4 reconciled shards and 1 shard end within 10% of each other."""
    domain, _, exact = adult_targets(DENSE)
    targets = noisy(exact, sigma=10.0)
    n = 20_000
    errors = {}
    for p in (1, 4):
        cfg = ShardedGumConfig(shard_size=-(-n // p), iterations_per_round=10, max_rounds=4)
        records, run = run_shards_locally(domain, targets, n, seed=0, config=cfg)
        assert records.shape == (n, len(domain)) and len(run.context.sizes) == p
        errors[p] = sum(run.final_errors.values())
        assert run.rounds == 4
    assert abs(errors[4] - errors[1]) <= 0.10 * errors[1], errors


def test_reconciliation_converges_on_exact_targets():
    domain, _, targets = adult_targets(MARGINALS)
    n = 48_842
    cfg = ShardedGumConfig(shard_size=12_211, iterations_per_round=10, max_rounds=4)
    records, run = run_shards_locally(domain, targets, n, seed=1, config=cfg)
    totals = [sum(h.values()) for h in run.history]
    assert totals[-1] < totals[0] / 2  # rounds pull the union toward the global targets
    assert run.max_relative_error() < 0.02
    for key in run.context.plan.targets:  # final_errors are the union's errors to the global targets
        got = marginal_counts(records, domain, key)
        assert np.abs(got - targets[key]).sum() == pytest.approx(run.final_errors[key])


def test_tolerance_stops_rounds():
    domain, _, targets = adult_targets(MARGINALS)
    cfg = ShardedGumConfig(shard_size=5_000, iterations_per_round=10, max_rounds=10, tolerance=0.05)
    _, run = run_shards_locally(domain, targets, 20_000, seed=2, config=cfg)
    assert run.rounds < 10
    assert max(run.history[-1].values()) <= 0.05 * 20_000


# ------------------------------------------------------------------------------------------------ Spark

SPARK_CFG = ShardedGumConfig(gum=GumConfig(), shard_size=5_000, iterations_per_round=5, max_rounds=3)


@pytest.mark.slow
def test_spark_table_matches_the_local_run_and_ignores_partitioning(spark, tmp_path):
    domain, _, targets = adult_targets(DENSE)
    n = 20_000
    expected, local = run_shards_locally(domain, targets, n, seed=7, config=SPARK_CFG)

    result = synthesize_sharded(spark, domain, targets, n, seed=7, config=SPARK_CFG,
                                checkpoint_dir=str(tmp_path / "checkpoints"))
    assert result.records.columns == list(domain.attrs)
    assert all(f.dataType.simpleString() == "int" for f in result.records.schema.fields)
    table = result.records.toPandas().to_numpy()
    assert np.array_equal(table, expected)  # shard randomness depends on (seed, shard, round) only
    assert result.rounds == local.rounds == 3
    assert result.final_errors == pytest.approx(local.final_errors)

    # another partitioning of the same 4 shards (one task running them all): same table
    again = synthesize_sharded(spark, domain, targets, n, seed=7, config=SPARK_CFG, partitions=1)
    assert np.array_equal(again.records.toPandas().to_numpy(), expected)


@pytest.mark.slow
def test_spark_same_seed_same_table_other_seed_other_table(spark):
    domain, _, targets = adult_targets(MARGINALS)
    cfg = ShardedGumConfig(shard_size=4_000, iterations_per_round=5, max_rounds=2)
    a = synthesize_sharded(spark, domain, targets, 12_000, seed=1, config=cfg).records.toPandas()
    b = synthesize_sharded(spark, domain, targets, 12_000, seed=1, config=cfg).records.toPandas()
    c = synthesize_sharded(spark, domain, targets, 12_000, seed=2, config=cfg).records.toPandas()
    assert a.equals(b)
    assert not a.equals(c)
    assert len(a) == 12_000
    for attr, size in domain.items():
        assert a[attr].between(0, size - 1).all()
