"""The `pgm` synthesizer's shard sampler: chunked, deterministic per (seed, shard), follows the model."""

from __future__ import annotations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.estimation import MirrorDescent
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.privacy.measurements import NoisyMarginal
from privsyn_spark.synthesize.gum.kernel import (
    GumConfig,
    gum_structure,
    initialize_records,
    l1_errors,
    marginal_counts,
    prepare_targets,
    synthesize,
)
from privsyn_spark.synthesize.pgm_sampling import sample_shard
from privsyn_spark.synthesize.sharded.reconcile import layout_counts


def chain_model():
    """A model fitted to the exact pair counts of a chain a -> b -> c -> d (5,000 rows)."""
    domain = Domain(("a", "b", "c", "d"), (3, 4, 5, 2))
    rng = np.random.default_rng(0)
    data = np.empty((5_000, 4), dtype=np.int64)
    data[:, 0] = rng.integers(0, 3, 5_000)
    for j, size in enumerate(domain.sizes[1:], start=1):
        data[:, j] = np.where(rng.random(5_000) < 0.7, data[:, j - 1] % size, rng.integers(0, size, 5_000))
    keys = [("a", "b"), ("b", "c"), ("c", "d")]
    marginals = [NoisyMarginal(k, marginal_counts(data, domain, k).astype(float), 1.0, 1.0) for k in keys]
    tree = build_junction_tree(domain, keys, 1e6)
    return domain, keys, MirrorDescent(cell_budget=1e6).estimate(marginals, domain, 5_000.0, tree=tree).model


def test_shard_sample_is_chunked_deterministic_and_follows_the_model():
    domain, keys, model = chain_model()
    parts = list(sample_shard(model, 25_000, seed=3, shard=1, chunk=10_000, batch=4_000))
    assert [p.shape[0] for p in parts] == [4_000, 4_000, 2_000, 4_000, 4_000, 2_000, 4_000, 1_000]
    assert all(p.dtype == np.int32 and p.shape[1] == 4 for p in parts)
    records = np.concatenate(parts)
    assert np.all((records >= 0) & (records < np.array(domain.sizes)))
    again = np.concatenate(list(sample_shard(model, 25_000, seed=3, shard=1, chunk=10_000, batch=4_000)))
    other = np.concatenate(list(sample_shard(model, 25_000, seed=3, shard=2, chunk=10_000, batch=4_000)))
    assert np.array_equal(records, again) and not np.array_equal(records, other)
    for k in keys:  # each chunk is an exact draw (systematic rounding): the counts follow the model closely
        want = model.marginal(k) / model.total
        got = marginal_counts(records, domain, k) / records.shape[0]
        assert 0.5 * np.abs(got - want).sum() < 0.01, k


def test_gum_from_model_samples_starts_close_and_ends_no_worse():
    """GUM started from the model's samples: far closer to the targets at the start, no worse at the end."""
    domain, keys, model = chain_model()
    targets = {k: model.marginal(k) for k in keys}
    n = 20_000
    structure = gum_structure(domain, targets)
    tables = prepare_targets(structure, targets, n)
    start = {}
    for name, m in (("1-way", None), ("model", model)):
        records = initialize_records(structure, tables, n, np.random.default_rng(1), model=m)
        assert records.shape == (n, 4) and records.flags.f_contiguous
        start[name] = sum(l1_errors(records, domain, tables, keys).values())
    assert start["model"] < 0.1 * start["1-way"]
    cfg = GumConfig(iterations=10, append_attributes=False)
    final = {name: np.mean([sum(synthesize(domain, targets, n, cfg, np.random.default_rng(s), model=m)
                                .final_errors.values()) for s in range(3)])
             for name, m in (("1-way", None), ("model", model))}
    assert final["model"] <= 1.05 * final["1-way"], final


def test_sharded_gum_from_model_samples():
    """Shards start from the model's samples (the context, model included, pickles for the broadcast)."""
    import pickle

    from privsyn_spark.synthesize.sharded.algorithm import init_shard, run_shards_locally
    from privsyn_spark.synthesize.sharded.context import ShardingConfig, make_context

    domain, keys, model = chain_model()
    targets = {k: model.marginal(k) for k in keys}
    gum = GumConfig(append_attributes=False)
    cfg = ShardingConfig(shard_rows=5_000, iterations_per_round=3, gum_rounds=2, model_max_rounds=1)
    ctx = pickle.loads(pickle.dumps(make_context(domain, targets, 10_000, 4, cfg, gum, model)))
    assert ctx.gum.improving_only_after == gum.model_improving_only_after == 0  # polishing only
    assert ctx.gum.best_cell_pairs == gum.model_best_cell_pairs > 0  # by best-cell moves
    assert ctx.sharding.iterations_per_round == 3  # model_iterations_per_round (5) caps k, never raises it
    assert make_context(domain, targets, 10_000, 4, ShardingConfig(), model=model).sharding.iterations_per_round == 5
    assert make_context(domain, targets, 10_000, 4, ShardingConfig()).sharding.iterations_per_round == 10
    records, counts = init_shard(ctx, 1)
    assert np.array_equal(records, init_shard(ctx, 1)[0]) and np.array_equal(counts, layout_counts(ctx.layout, records))
    final = {}
    for name, m in (("1-way", None), ("model", model)):
        records, run = run_shards_locally(domain, targets, 10_000, seed=4, sharding=cfg, gum=gum, model=m)
        assert records.shape == (10_000, 4) and len(run.context.sizes) == 2
        assert run.rounds == (2 if m is None else 1)  # a model start runs model_max_rounds Jacobi rounds
        final[name] = sum(run.final_errors.values())
    assert final["model"] <= final["1-way"], final
    rounds = ShardingConfig(shard_rows=5_000, iterations_per_round=3, gum_rounds=8)
    _, run = run_shards_locally(domain, targets, 10_000, seed=4, model=model, gum=gum, sharding=rounds)
    assert run.rounds == 1 and max(run.history[0].values()) / 10_000 <= rounds.model_tolerance  # model_tolerance
    rounds = ShardingConfig(shard_rows=5_000, iterations_per_round=3, gum_rounds=8, model_tolerance=0.0)
    _, run = run_shards_locally(domain, targets, 10_000, seed=4, model=model, gum=gum, sharding=rounds)
    worst = [max(h.values()) for h in run.history]
    gain = run.context.sharding.model_min_gain
    assert 2 <= run.rounds < 8 and worst[-2] - worst[-1] < gain * worst[-2], worst  # model_min_gain stopped it



def test_the_fitted_model_round_trips_through_the_run_folder(tmp_path):
    """The estimate step saves its model beside the targets; a later step loads the same model (same samples)."""
    from privsyn_spark.run_artifacts import RunArtifacts

    domain, keys, model = chain_model()
    artifacts = RunArtifacts(str(tmp_path), "r1")
    assert artifacts.load_model("r1", domain) is None
    artifacts.save_model("r1", model)
    assert artifacts.load_model("other", domain) is None
    loaded = artifacts.load_model("r1", domain)
    assert loaded.total == model.total and loaded.tree.cliques == model.tree.cliques
    for k in keys:
        assert np.allclose(loaded.marginal(k), model.marginal(k))
    assert np.array_equal(loaded.sample(1_000, np.random.default_rng(4)), model.sample(1_000, np.random.default_rng(4)))


def test_a_model_start_stops_iterating_once_an_iteration_gains_little():
    """From the model's samples, GUM stops a component once an iteration lowers its worst L1/n by less than
    ``model_min_gain``; without it (``min_gain`` 0) every iteration runs."""
    from dataclasses import replace

    from privsyn_spark.synthesize.gum.kernel import run_gum

    domain, keys, model = chain_model()
    targets = {k: model.marginal(k) for k in keys}
    n = 20_000
    structure = gum_structure(domain, targets)
    tables = prepare_targets(structure, targets, n)
    cfg = GumConfig(iterations=40, append_attributes=False)
    histories = {}
    for name, gum in (("stopping", cfg.for_model_start()), ("every", replace(cfg.for_model_start(), min_gain=0.0))):
        records = initialize_records(structure, tables, n, np.random.default_rng(2), model=model)
        histories[name] = run_gum(records, structure, tables, gum, np.random.default_rng(3))
    assert len(structure.components) == 1 and {len(h) for h in histories["every"].values()} == {41}
    stopping = np.max(list(histories["stopping"].values()), axis=0)
    assert 2 <= len(stopping) < 41
    assert stopping[-2] - stopping[-1] < cfg.model_min_gain * stopping[-2]
    assert np.all(stopping[:-2] - stopping[1:-1] >= cfg.model_min_gain * stopping[:-2])
