"""GUM sharded over Spark partitions: reconciliation, determinism, and the Spark driver."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from privsyn_spark.measure.count_layout import CountLayout
from privsyn_spark.synthesize.gum.kernel import GumConfig, append_conditional, gum_structure, marginal_counts
from privsyn_spark.synthesize.sharded.algorithm import (
    deficit_share,
    init_shard,
    round_shard,
    run_shards_locally,
    turn_shard,
    union_errors,
)
from privsyn_spark.synthesize.sharded.context import ShardingConfig, make_context, shard_count, shard_sizes
from privsyn_spark.synthesize.sharded.reconcile import append_split, layout_counts
from privsyn_spark.synthesize.sharded.spark_driver import synthesize_sharded
from tests.synthesize.adult_data import DENSE, MARGINALS, adult_targets


def noisy(targets: dict, sigma: float, seed: int = 123) -> dict:
    """DP-like targets: Gaussian noise per cell, clipped at 0 (inconsistent, like PrivSyn's raw marginals)."""
    rng = np.random.default_rng(seed)
    return {k: np.clip(t + rng.normal(0, sigma, t.shape), 0, None) for k, t in targets.items()}


def test_shard_sizes():
    assert shard_sizes(10, 4) == [4, 3, 3]
    assert shard_sizes(5, 1_000_000) == [5]
    sizes = shard_sizes(10_000_001, 1_000_000)
    assert len(sizes) == 11 and sum(sizes) == 10_000_001 and max(sizes) - min(sizes) <= 1


def test_shard_count_gives_every_core_a_shard_of_a_sensible_size():
    assert shard_count(661_759, 1_000_000, parallelism=2) == 2  # local[2]: both cores work
    assert shard_count(661_759, 1_000_000, parallelism=8) == 6  # no shard below 10^5 records
    assert shard_count(48_842, 1_000_000, parallelism=2) == 1   # too small to split
    assert shard_count(199_999, 1_000_000, parallelism=4) == 1
    assert shard_count(10_000_001, 1_000_000, parallelism=2) == 11  # shard_size rules when it gives more
    assert shard_count(5_000, 1_000_000, parallelism=4, min_shard_size=1_000) == 4
    assert shard_count(0, 1_000_000, parallelism=4) == 1
    sizes = shard_sizes(661_759, 1_000_000, parallelism=2)
    assert sizes == [330_880, 330_879] and sum(sizes) == 661_759


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


def test_count_layout_round_trip():
    domain, records, targets = adult_targets(MARGINALS)
    layout = CountLayout(domain, list(targets))
    flat = layout_counts(layout, records)
    assert flat.size == sum(t.size for t in targets.values())
    for k, t in layout.unpack(flat).items():
        assert np.array_equal(t, targets[k])
    assert np.array_equal(layout.pack(layout.unpack(flat), np.int64), flat)


def test_shard_steps_are_pure_functions_of_seed_shard_and_round():
    """What makes a recomputed task (lost executor) produce the same shard state."""
    domain, _, targets = adult_targets(DENSE)
    cfg = ShardingConfig(shard_rows=2_500, iterations_per_round=3)
    ctx = make_context(domain, targets, 10_000, 5, cfg)
    records, counts = init_shard(ctx, 2)
    again, counts_again = init_shard(ctx, 2)
    assert np.array_equal(records, again) and np.array_equal(counts, counts_again)
    assert not np.array_equal(records, init_shard(ctx, 1)[0])
    deficit = ctx.targets - 4 * counts
    a = round_shard(ctx, 2, 1, records.copy(), counts.astype(float), deficit)
    b = round_shard(ctx, 2, 1, records.copy(), counts.astype(float), deficit)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(a[1], layout_counts(ctx.layout, a[0]))
    turn = ShardingConfig(shard_rows=2_500, gum_sweeps=1).steps(4)[-2]  # shard 2's turn
    c = turn_shard(ctx, 2, turn, records.copy(), counts.astype(float), deficit)
    d = turn_shard(ctx, 2, turn, records.copy(), counts.astype(float), deficit)
    assert turn.shard == 2 and np.array_equal(c[0], d[0]) and np.array_equal(c[1], d[1])


def test_schedule_runs_jacobi_rounds_then_sweeps_of_turns():
    cfg = ShardingConfig(iterations_per_round=10, gum_rounds=3, gum_sweeps=3, sweep_iterations=4,
                           settle_iterations=1, settle_sweeps=1)
    for p in (1, 3):
        steps = cfg.steps(p)
        assert [s.round for s in steps] == list(range(1, len(steps) + 1))
        assert [s.shard for s in steps[:2]] == [None, None] and [s.start for s in steps[:2]] == [10, 20]
        turns = steps[2:]
        assert [s.shard for s in turns] == list(range(p)) * 3
        assert [(s.free, s.settle) for s in turns] == [(3, 1)] * 2 * p + [(0, 4)] * p  # the last sweep settles
        for shard in range(p):  # every shard runs the same iterations whatever the number of shards
            mine = [s for s in turns if s.shard == shard]
            assert [s.start for s in mine] == [30, 34, 38]
            assert 10 + 10 * 2 + sum(s.free + s.settle for s in mine) == 42
    assert ShardingConfig(gum_rounds=2).steps(5) == ShardingConfig(gum_rounds=2).steps(1)  # no sweeps
    with pytest.raises(ValueError):
        ShardingConfig(sweep_iterations=2, settle_iterations=3)


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "noisy"])
def test_a_turn_never_raises_the_union_error(exact):
    """A turn gives one shard the whole deficit and is kept only if the union's error does not grow."""
    domain, _, targets = adult_targets(DENSE)
    targets = targets if exact else noisy(targets, sigma=10.0)
    cfg = ShardingConfig(shard_rows=5_000, iterations_per_round=10, gum_rounds=1, gum_sweeps=1)
    ctx = make_context(domain, targets, 20_000, 3, cfg)
    state = [init_shard(ctx, j) for j in range(4)]
    for step in cfg.steps(4):
        total = sum(c for _, c in state)
        before = sum(union_errors(ctx, total).values())
        rec, c = state[step.shard]
        new_rec, new_c = turn_shard(ctx, step.shard, step, rec, c.astype(float), ctx.targets - total)
        assert np.array_equal(new_c, layout_counts(ctx.layout, new_rec))
        after = sum(union_errors(ctx, total - c + new_c).values())
        assert after <= before
        if exact:  # from the Jacobi start (about 4 single-shard floors), a turn has plenty to fix
            assert after < 0.8 * before
        state[step.shard] = (new_rec, new_c)


def test_appended_counts_split_exactly_over_shards():
    """Shards' appended counts sum to the union's conditional counts, each shard's rows to its own records."""
    domain, _, targets = adult_targets(MARGINALS)
    structure = gum_structure(domain, targets)
    groups = [g for comp in structure.components for g in comp.appends]
    rng = np.random.default_rng(4)
    have = {g: rng.integers(0, 40, size=(5, append_conditional(targets[g.marginal], g).shape[0])) for g in groups}
    split = append_split(structure, targets, have, np.random.default_rng(5))
    for g in groups:
        cond = append_conditional(targets[g.marginal], g)
        parts = [split[g].counts(cond, have[g][j], j) for j in range(5)]
        for j, part in enumerate(parts):
            assert np.array_equal(part.sum(axis=1), have[g][j])
            assert np.all(part >= np.floor(cond * have[g][j][:, None]))  # its floors plus a slice of remainders
        union = sum(parts)
        assert np.all(np.abs(union - cond * have[g].sum(axis=0)[:, None]) < 1)  # rounded as one table


SWEEPS_GUM = GumConfig(best_cell_pairs=400_000)
SWEEPS = dict(iterations_per_round=10, gum_rounds=4, gum_sweeps=10,
              sweep_iterations=3, settle_iterations=2, settle_sweeps=3)
"""4 Jacobi rounds of 10 iterations, then 10 sweeps of 3-iteration turns: 70 local iterations per shard;
best-cell polishing moves in the rounds too (sweeps always use them), for the lowest single-shard floor."""


@pytest.mark.slow
def test_four_shards_reach_the_single_shard_error():
    """On DP-like noisy targets, 4 reconciled shards (with sweeps) end at the summed L1 of 1 shard, seed by seed.

    Each seed draws its own noise and runs both. Over seeds 0-9 the ratio (4 shards / 1 shard) lay in
    0.985-1.012 (mean 0.996; summed L1 ~4,000, the noise's floor); without the sweeps (Jacobi rounds only)
    it is 1.13-1.16. Every seed's ratio within 4 % of 1, and their mean within 2 %.
    """
    domain, _, exact = adult_targets(DENSE)
    n = 20_000
    ratios = []
    for seed in range(4):
        targets = noisy(exact, sigma=10.0, seed=123 + seed)
        errors = {}
        for p in (1, 4):
            cfg = ShardingConfig(shard_rows=-(-n // p), **SWEEPS)
            records, run = run_shards_locally(domain, targets, n, seed=seed, sharding=cfg, gum=SWEEPS_GUM)
            assert records.shape == (n, len(domain)) and len(run.context.sizes) == p
            assert run.rounds == 1 + 3 + 10 * p
            errors[p] = sum(run.final_errors.values())
        ratios.append(errors[4] / errors[1])
    assert max(abs(r - 1) for r in ratios) <= 0.04, ratios
    assert abs(np.mean(ratios) - 1) <= 0.02, ratios


@pytest.mark.slow
def test_four_shards_reach_the_single_shard_error_on_exact_targets():
    """On exact marginals of the Adult table, sweeps bring 4 shards to the error of 1 shard (same iterations).

    Jacobi rounds alone leave 4 shards 5-8x above 1 shard here (GUM's error floor is absolute, one per
    shard). A single run's error varies by +-30% with the seed at this level (~100 summed L1 over 37
    targets, 3 records per target), so the means over 6 seeds are compared. Since best-cell polishing
    scores its candidates on the marginals a Replace touches (not on those a Duplicate would), 1 shard
    ends at a summed L1 of 75 (worst 0.00029 n) and 4 shards at 96 (0.00045 n), both below 1 shard before
    (119, 0.00057 n; 4 shards were at 104, 0.00044 n): 4 shards stay within 30% of 1 shard summed, 60% worst.
    """
    domain, records, targets = adult_targets(DENSE)
    n = records.shape[0]
    errors, worst = {}, {}
    for p in (1, 4):
        runs = [run_shards_locally(domain, targets, n, seed, ShardingConfig(shard_rows=-(-n // p), **SWEEPS),
                                   SWEEPS_GUM)[1] for seed in range(1, 7)]
        assert all(len(run.context.sizes) == p for run in runs)
        errors[p] = np.mean([sum(run.final_errors.values()) for run in runs])
        worst[p] = np.mean([run.max_relative_error() for run in runs])
    assert errors[4] <= 1.30 * errors[1], errors
    assert worst[4] <= 1.60 * worst[1], worst
    assert max(errors.values()) < 0.0022 * n and max(worst.values()) < 0.0006, (errors, worst)


def test_four_shards_fit_exact_sparse_marginals_exactly():
    """The sparse set is fit exactly by 1 shard; so it is by 4, appended attributes included."""
    domain, records, targets = adult_targets(MARGINALS)
    n = records.shape[0]
    for p in (1, 4):
        _, run = run_shards_locally(domain, targets, n, 1, ShardingConfig(shard_rows=-(-n // p), **SWEEPS), SWEEPS_GUM)
        assert set(run.final_errors) == set(targets) and sum(run.final_errors.values()) == 0, p


def test_reconciliation_converges_on_exact_targets():
    domain, _, targets = adult_targets(MARGINALS)
    n = 48_842
    cfg = ShardingConfig(shard_rows=12_211, iterations_per_round=10, gum_rounds=4)
    records, run = run_shards_locally(domain, targets, n, seed=1, sharding=cfg)
    totals = [sum(h.values()) for h in run.history]
    assert totals[-1] < totals[0] / 2  # rounds pull the union toward the global targets
    assert run.max_relative_error() < 0.02
    for key in run.context.structure.targets:  # final_errors are the union's errors to the global targets
        got = marginal_counts(records, domain, key)
        assert np.abs(got - targets[key]).sum() == pytest.approx(run.final_errors[key])


def test_tolerance_stops_rounds():
    domain, _, targets = adult_targets(MARGINALS)
    cfg = ShardingConfig(shard_rows=5_000, iterations_per_round=10, gum_rounds=10, tolerance=0.05)
    _, run = run_shards_locally(domain, targets, 20_000, seed=2, sharding=cfg)
    assert run.rounds < 10
    assert max(run.history[-1].values()) <= 0.05 * 20_000


# ------------------------------------------------------------------------------------------------ Spark

SPARK_CFG = ShardingConfig(shard_rows=5_000, iterations_per_round=5, gum_rounds=3, gum_sweeps=1)


@pytest.mark.slow
def test_spark_table_matches_the_local_run_and_ignores_partitioning(spark, tmp_path):
    domain, _, targets = adult_targets(DENSE)
    n = 20_000
    expected, local = run_shards_locally(domain, targets, n, seed=7, sharding=SPARK_CFG)

    result = synthesize_sharded(spark, domain, targets, n, seed=7, sharding=SPARK_CFG,
                                checkpoint_dir=str(tmp_path / "checkpoints"))
    assert result.records.columns == list(domain.attrs)
    assert all(f.dataType.simpleString() == "int" for f in result.records.schema.fields)
    table = result.records.toPandas().to_numpy()
    assert np.array_equal(table, expected)  # shard randomness depends on (seed, shard, round) only
    assert result.rounds == local.rounds == 3 + 4  # Jacobi rounds, then one turn per shard
    assert result.final_errors == pytest.approx(local.final_errors)

    # another partitioning of the same 4 shards (one task running them all): same table
    again = synthesize_sharded(spark, domain, targets, n, seed=7, sharding=SPARK_CFG, partitions=1)
    assert np.array_equal(again.records.toPandas().to_numpy(), expected)


@pytest.mark.slow
def test_spark_gives_every_core_a_shard_and_matches_the_local_run(spark):
    """On local[2] one shard_size-sized shard becomes two (min_shard_size allowing): the table is the local run's
    with two shards, and the reconciled union stays within 1.5x of the one-shard run's error."""
    domain, _, targets = adult_targets(MARGINALS)
    n = 6_000
    cfg = ShardingConfig(shard_rows=1_000_000, min_shard_size=2_000, iterations_per_round=5, gum_rounds=3)
    assert spark.sparkContext.defaultParallelism == 2
    result = synthesize_sharded(spark, domain, targets, n, seed=3, sharding=cfg)
    assert result.context.sizes == (3_000, 3_000)
    expected, local = run_shards_locally(domain, targets, n, seed=3, sharding=replace(cfg, shard_rows=3_000))
    assert np.array_equal(result.records.toPandas().to_numpy(), expected)
    assert result.final_errors == pytest.approx(local.final_errors)
    _, single = run_shards_locally(domain, targets, n, seed=3, sharding=cfg)
    assert single.context.sizes == (6_000,)
    assert sum(local.final_errors.values()) <= 1.5 * sum(single.final_errors.values())


@pytest.mark.slow
def test_spark_same_seed_same_table_other_seed_other_table(spark):
    domain, _, targets = adult_targets(MARGINALS)
    cfg = ShardingConfig(shard_rows=4_000, iterations_per_round=5, gum_rounds=2)
    a = synthesize_sharded(spark, domain, targets, 12_000, seed=1, sharding=cfg).records.toPandas()
    b = synthesize_sharded(spark, domain, targets, 12_000, seed=1, sharding=cfg).records.toPandas()
    c = synthesize_sharded(spark, domain, targets, 12_000, seed=2, sharding=cfg).records.toPandas()
    assert a.equals(b)
    assert not a.equals(c)
    assert len(a) == 12_000
    for attr, size in domain.items():
        assert a[attr].between(0, size - 1).all()
